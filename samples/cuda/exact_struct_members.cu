// VARIANT: same-member
// Two kernels take one struct of three buffer pointers; on two unordered streams the first writes member b and
// the second member c (clean: different buffers). With "same-member" both write b (a race). Tier T1 scans the
// struct and takes every pointer in it as a possible write, so it reports both; --exact sees which was written.
#include <cstring>
#include "common.cuh"
struct Buffers {
    float* a;
    float* b;
    float* c;
};
__global__ void write_member(Buffers buffers, int which, int n) {
    float* out = which == 1 ? buffers.b : buffers.c;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = buffers.a[i] + which;
}
int main(int argc, char** argv) {
    bool same = argc > 1 && std::strcmp(argv[1], "same-member") == 0;
    Buffers buffers;
    CHECK(cudaMalloc(&buffers.a, N * sizeof(float)));
    CHECK(cudaMalloc(&buffers.b, N * sizeof(float)));
    CHECK(cudaMalloc(&buffers.c, N * sizeof(float)));
    CHECK(cudaMemset(buffers.a, 0, N * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    write_member<<<64, 256, 0, s1>>>(buffers, 1, N);
    write_member<<<64, 256, 0, s2>>>(buffers, same ? 1 : 2, N);
    CHECK(cudaDeviceSynchronize());
    if (same) {
        ground_truth("race", "write_member on s1 and s2 both write member b, write-after-write");
    } else {
        ground_truth("clean", "write_member on s1 writes b, on s2 writes c; both only read a");
    }
    return 0;
}
