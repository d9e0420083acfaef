// LINK: -lcublas
// A cuBLAS matrix product on one stream writes C while an asynchronous copy on another stream reads C to the
// host, with nothing ordering them: a race on C (read-after-write). The library's kernel gets its pointers
// inside one parameter struct; --exact sees the bytes it wrote.
#include <cublas_v2.h>
#include "common.cuh"
int main() {
    const int m = 1024;
    float *a, *b, *c, *host;
    CHECK(cudaMalloc(&a, m * m * sizeof(float)));
    CHECK(cudaMalloc(&b, m * m * sizeof(float)));
    CHECK(cudaMalloc(&c, m * m * sizeof(float)));
    CHECK(cudaMallocHost(&host, m * m * sizeof(float)));
    CHECK(cudaMemset(a, 0, m * m * sizeof(float)));
    CHECK(cudaMemset(b, 0, m * m * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t compute, copy;
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    cublasHandle_t handle;
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS || cublasSetStream(handle, compute) != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "cuBLAS could not start\n");
        return 1;
    }
    const float one = 1.f, zero = 0.f;
    if (cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, m, b, m, &zero, c, m) != CUBLAS_STATUS_SUCCESS) {
        std::fprintf(stderr, "cublasSgemm failed\n");
        return 1;
    }
    CHECK(cudaMemcpyAsync(host, c, m * m * sizeof(float), cudaMemcpyDeviceToHost, copy));  // not after the gemm
    CHECK(cudaDeviceSynchronize());
    cublasDestroy(handle);
    ground_truth("race", "the cuBLAS gemm on stream compute writes C; cudaMemcpyAsync on stream copy reads C, read-after-write");
    return 0;
}
