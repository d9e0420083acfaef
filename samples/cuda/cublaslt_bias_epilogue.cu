// LINK: -lcublasLt
// VARIANT: one-out
// Two non-blocking streams run one layer on two batches with cuBLASLt, Y = W X + b, the bias added by the matmul's
// epilogue (CUBLASLT_EPILOGUE_BIAS). W and b lie in one allocation of parameters, as llm.c and PyTorch's caching
// allocator lay them out: the bias's pointer, handed to the kernel inside its parameters, points into W's block.
// Without an argument: clean (both streams only read W and b, and write outputs of their own). "one-out": both
// write one output (race: write-after-write).
#include <cublasLt.h>
#include <string>
#include "common.cuh"
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "clean";
    const int d = 256, n = 128;
    const size_t workspace_bytes = 4 << 20;
    float *params, *x1, *x2, *y1, *y2;
    void *ws1, *ws2;
    CHECK(cudaMalloc(&params, (size_t(d) * d + d) * sizeof(float)));
    float* w = params;
    float* bias = params + size_t(d) * d;
    CHECK(cudaMalloc(&x1, size_t(d) * n * sizeof(float)));
    CHECK(cudaMalloc(&x2, size_t(d) * n * sizeof(float)));
    CHECK(cudaMalloc(&y1, size_t(d) * n * sizeof(float)));
    CHECK(cudaMalloc(&y2, size_t(d) * n * sizeof(float)));
    CHECK(cudaMalloc(&ws1, workspace_bytes));
    CHECK(cudaMalloc(&ws2, workspace_bytes));
    write_kernel<<<64, 256>>>(params, d * d + d, 0.01f);
    write_kernel<<<64, 256>>>(x1, d * n, 1.f);
    write_kernel<<<64, 256>>>(x2, d * n, 2.f);
    // The streams below are non-blocking: they wait for none of the set-up above without this.
    CHECK(cudaDeviceSynchronize());
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cublasLtHandle_t lt;
    CUBLAS_CHECK(cublasLtCreate(&lt));
    cublasLtMatmulDesc_t desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    cublasLtMatrixLayout_t square, batch;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&square, CUDA_R_32F, d, d, d));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&batch, CUDA_R_32F, d, n, d));
    const float one = 1.f, zero = 0.f;
    auto layer = [&](const float* x, float* y, void* ws, cudaStream_t s) {
        CUBLAS_CHECK(cublasLtMatmul(lt, desc, &one, w, square, x, batch, &zero, y, batch, y, batch, nullptr, ws,
                                    workspace_bytes, s));
    };
    layer(x1, y1, ws1, s1);
    layer(x2, mode == "one-out" ? y1 : y2, ws2, s2);
    CHECK(cudaDeviceSynchronize());
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(square));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(batch));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
    CUBLAS_CHECK(cublasLtDestroy(lt));
    if (mode == "one-out")
        ground_truth("race", "both streams' matmuls write one output, unordered: write-after-write");
    else
        ground_truth("clean", "two streams read W and its bias from one block of parameters, and write outputs of their own");
    return 0;
}
