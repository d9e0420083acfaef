// Overhead benchmark for `streamtrace capture`: 100,000 kernel launches over 4 streams with an event hand-over
// every 8 launches. Prints its own wall time; run it plain and under capture and compare. A warm-up of 20,000
// launches, not timed, loads the kernel and brings the GPU's clocks up first (plain runs varied by 30% without).
#include <chrono>
#include <cstdio>
#include <cuda_runtime.h>

__global__ void step(float* data, const float* other, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = data[i] * 0.5f + other[i];
}

int main(int argc, char** argv) {
    const int launches = argc > 1 ? std::atoi(argv[1]) : 100000;
    const int n = 1 << 12, streams = 4;
    float* bufs[streams];
    cudaStream_t s[streams];
    cudaEvent_t ev[streams];
    for (int k = 0; k < streams; ++k) {
        cudaMalloc(&bufs[k], n * sizeof(float));
        cudaMemset(bufs[k], 0, n * sizeof(float));
        cudaStreamCreateWithFlags(&s[k], cudaStreamNonBlocking);
        cudaEventCreateWithFlags(&ev[k], cudaEventDisableTiming);
    }
    auto run = [&](int count) {
        for (int i = 0; i < count; ++i) {
            int k = i % streams, prev = (k + streams - 1) % streams;
            if (i % 8 == 0) {
                cudaEventRecord(ev[prev], s[prev]);
                cudaStreamWaitEvent(s[k], ev[prev], 0);
            }
            step<<<n / 256, 256, 0, s[k]>>>(bufs[k], bufs[prev], n);
        }
    };
    run(20000);
    cudaDeviceSynchronize();
    auto start = std::chrono::steady_clock::now();
    run(launches);
    cudaDeviceSynchronize();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("launches %d in %.3f s\n", launches, seconds);
    return 0;
}
