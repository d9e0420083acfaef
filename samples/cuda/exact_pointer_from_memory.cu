// A kernel writes through a pointer it loads from device memory (a table of buffers, as libraries keep), on
// one stream, while a kernel on another stream reads that buffer, unordered: a race. No argument of the writing
// kernel points into the buffer, so tier T1 misses it; --exact sees the address the store went to.
#include "common.cuh"
__global__ void write_through_table(float* const* table, int n) {
    float* target = table[0];
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) target[i] = 3.f;
}
int main() {
    float *buf, *out, **table;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 1024 * sizeof(float)));
    CHECK(cudaMalloc(&table, sizeof(float*)));
    CHECK(cudaMemcpy(table, &buf, sizeof(float*), cudaMemcpyHostToDevice));
    // A copy from pageable memory returns before its DMA lands (DESIGN rule 6): wait, so that the table is
    // written before a non-blocking stream reads it.
    CHECK(cudaDeviceSynchronize());
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    write_through_table<<<64, 256, 0, s1>>>(table, N);
    read_kernel<<<64, 256, 0, s2>>>(buf, out, N);  // nothing orders it after the write through the table
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "write_through_table on s1 writes buf through a pointer loaded from memory; read_kernel on s2 reads it, read-after-write");
    return 0;
}
