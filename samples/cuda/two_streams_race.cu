// Two streams write one buffer with no wait between them.
#include "common.cuh"
int main() {
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    write_kernel<<<256, 256, 0, b>>>(buf, N, 2.f);  // nothing orders it after stream a's write
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "write_kernel on stream a and write_kernel on stream b, write-after-write on buf");
    return 0;
}
