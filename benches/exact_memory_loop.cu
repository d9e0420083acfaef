// Cost benchmark for `streamtrace capture --exact`: a memory-bound kernel (a copy of 1 GiB, every byte read and
// written once) run ITERS times (default 10). Prints its wall time; run it plain, under the default capture and
// under --exact, and compare.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void stream_copy(const float4* in, float4* out, size_t n) {
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) out[i] = in[i];
}

int main(int argc, char** argv) {
    const int iters = argc > 1 ? std::atoi(argv[1]) : 10;
    const size_t bytes = size_t(1) << 30, n = bytes / sizeof(float4);
    float4 *in, *out;
    if (cudaMalloc(&in, bytes) != cudaSuccess || cudaMalloc(&out, bytes) != cudaSuccess) return 1;
    cudaMemset(in, 1, bytes);
    stream_copy<<<2048, 256>>>(in, out, n);  // warm-up: module load, clocks
    if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) stream_copy<<<2048, 256>>>(in, out, n);
    if (cudaDeviceSynchronize() != cudaSuccess) return 1;
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("memory loop: %d copies of 1 GiB in %.1f ms (%.2f ms each)\n", iters, ms, ms / iters);
    return 0;
}
