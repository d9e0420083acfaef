// LINK: -lcublas
// VARIANT: swap
// VARIANT: one-result
// Two non-blocking streams with a cuBLAS handle each (pointer mode device) share a vector and a matrix they only
// read: stream 1 takes the vector's norm (cublasSnrm2) and its sum of magnitudes (cublasSasum), and transposes
// the matrix (cublasSgeam, B null); stream 2 finds the index of the vector's largest element (cublasIsamax) and
// adds the matrix to itself (cublasSgeam); each writes its results into device memory of its own. Without an
// argument: clean (cuBLAS's kernels take their operands inside a struct of parameters, which tier T1 alone
// would take as writes of both shared blocks). "swap": stream 2 swaps the vector with another (cublasSswap)
// instead of its reduction, while stream 1 reads it (race: write-after-read or read-after-write). "one-result":
// both streams' reductions write one device result (race: write-after-write).
#include <cublas_v2.h>
#include <string>
#include "common.cuh"
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "clean";
    const int n = 1 << 16, d = 256;
    float *x, *other, *w, *wt, *w2, *results, *scalars;
    int* index;
    CHECK(cudaMalloc(&x, n * sizeof(float)));
    CHECK(cudaMalloc(&other, n * sizeof(float)));
    CHECK(cudaMalloc(&w, size_t(d) * d * sizeof(float)));
    CHECK(cudaMalloc(&wt, size_t(d) * d * sizeof(float)));
    CHECK(cudaMalloc(&w2, size_t(d) * d * sizeof(float)));
    CHECK(cudaMalloc(&results, 4 * sizeof(float)));
    CHECK(cudaMalloc(&index, sizeof(int)));
    CHECK(cudaMalloc(&scalars, 2 * sizeof(float)));
    write_kernel<<<64, 256>>>(x, n, 1.f);
    write_kernel<<<64, 256>>>(other, n, 2.f);
    write_kernel<<<64, 256>>>(w, d * d, 0.5f);
    const float host_scalars[2] = {1.f, 0.f};
    CHECK(cudaMemcpy(scalars, host_scalars, sizeof(host_scalars), cudaMemcpyHostToDevice));
    // The streams below are non-blocking: they wait for none of the set-up above without this.
    CHECK(cudaDeviceSynchronize());
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cublasHandle_t h1, h2;
    CUBLAS_CHECK(cublasCreate(&h1));
    CUBLAS_CHECK(cublasCreate(&h2));
    CUBLAS_CHECK(cublasSetStream(h1, s1));
    CUBLAS_CHECK(cublasSetStream(h2, s2));
    CUBLAS_CHECK(cublasSetPointerMode(h1, CUBLAS_POINTER_MODE_DEVICE));
    CUBLAS_CHECK(cublasSetPointerMode(h2, CUBLAS_POINTER_MODE_DEVICE));
    const float* one = scalars;
    const float* zero = scalars + 1;

    // Stream 1: ||x||, sum |x_i|, W^T.
    CUBLAS_CHECK(cublasSnrm2(h1, n, x, 1, results + 0));
    CUBLAS_CHECK(cublasSasum(h1, n, x, 1, results + 1));
    CUBLAS_CHECK(cublasSgeam(h1, CUBLAS_OP_T, CUBLAS_OP_N, d, d, one, w, d, zero, nullptr, d, wt, d));
    // Stream 2: argmax |x_i| ("swap": x <-> other), W + W.
    if (mode == "swap")
        CUBLAS_CHECK(cublasSswap(h2, n, x, 1, other, 1));
    else if (mode == "one-result")
        CUBLAS_CHECK(cublasSnrm2(h2, n, other, 1, results + 0));
    else
        CUBLAS_CHECK(cublasIsamax(h2, n, x, 1, index));
    CUBLAS_CHECK(cublasSgeam(h2, CUBLAS_OP_N, CUBLAS_OP_N, d, d, one, w, d, one, w, d, w2, d));
    CHECK(cudaDeviceSynchronize());
    float host_results[2];
    CHECK(cudaMemcpy(host_results, results, sizeof(host_results), cudaMemcpyDeviceToHost));
    std::printf("norm %.1f sum %.1f\n", host_results[0], host_results[1]);
    CUBLAS_CHECK(cublasDestroy(h1));
    CUBLAS_CHECK(cublasDestroy(h2));
    if (mode == "swap")
        ground_truth("race", "stream 2 swaps x while stream 1 takes its norm and sum, unordered: write-after-read");
    else if (mode == "one-result")
        ground_truth("race", "both streams' norms write the same device result, unordered: write-after-write");
    else
        ground_truth("clean", "two streams only read x and W, and write results and matrices of their own");
    return 0;
}
