// Two kernels read one buffer concurrently: read/read is never a race.
#include "common.cuh"
int main() {
    float *buf, *out_a, *out_b;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out_a, 256 * sizeof(float)));
    CHECK(cudaMalloc(&out_b, 256 * sizeof(float)));
    write_kernel<<<256, 256>>>(buf, N, 1.f);
    CHECK(cudaDeviceSynchronize());
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    read_kernel<<<256, 256, 0, a>>>(buf, out_a, N);
    read_kernel<<<256, 256, 0, b>>>(buf, out_b, N);
    CHECK(cudaDeviceSynchronize());
    ground_truth("clean", "two read_kernels on two streams, each writing its own output");
    return 0;
}
