// cudaMemcpyBatchAsync (CUDA 12.8+) on one non-blocking stream copies out of a buffer a kernel on another
// non-blocking stream is still writing; the second copy of the batch touches an untouched buffer.
#include "common.cuh"
int main() {
    float *buf, *other, *out_a, *out_b;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&other, N * sizeof(float)));
    CHECK(cudaMalloc(&out_a, N * sizeof(float)));
    CHECK(cudaMalloc(&out_b, N * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t compute, copy;
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, compute>>>(buf, N, 2.f);
    void* dsts[2] = {out_a, out_b};
    void* srcs[2] = {buf, other};
    size_t sizes[2] = {N * sizeof(float), N * sizeof(float)};
    cudaMemcpyAttributes attr = {};
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t attr_index = 0;
    CHECK(cudaMemcpyBatchAsync(dsts, srcs, sizes, 2, &attr, &attr_index, 1, copy));  // no wait for compute
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "write_kernel on the compute stream and the first copy of cudaMemcpyBatchAsync on the copy stream: read-after-write on buf");
    return 0;
}
