// LINK: -lcublas
// VARIANT: same-out
// VARIANT: chain
// VARIANT: chain-event
// One cuBLAS handle moved between two non-blocking streams with cublasSetStream, as code that keeps one handle per
// device does. Without an argument: gemm 1 on stream a computes C1 = A*B, gemm 2 on stream b computes C2 = A*B:
// both only read A and B and write their own C (clean: read/read is never a race, DESIGN.md rule 11). "same-out":
// gemm 2 also writes C1 (race: write-after-write on C1). "chain": gemm 2 computes C2 = C1*B with nothing ordering
// it after gemm 1 (race: read-after-write on C1). "chain-event": the same with b waiting on an event recorded on a
// after gemm 1 (clean). cublasSetStream orders nothing by itself.
#include <cublas_v2.h>
#include <string>
#include "common.cuh"
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "shared-inputs";
    const int m = 1024;
    const size_t bytes = size_t(m) * m * sizeof(float);
    float *a, *b, *c1, *c2;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    CHECK(cudaMalloc(&c1, bytes));
    CHECK(cudaMalloc(&c2, bytes));
    CHECK(cudaMemset(a, 0, bytes));
    CHECK(cudaMemset(b, 0, bytes));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t sa, sb;
    CHECK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    cublasHandle_t handle;
    CUBLAS_CHECK(cublasCreate(&handle));
    const float one = 1.f, zero = 0.f;
    CUBLAS_CHECK(cublasSetStream(handle, sa));
    CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, m, b, m, &zero, c1, m));
    if (mode == "chain-event") {
        CHECK(cudaEventRecord(done, sa));
        CHECK(cudaStreamWaitEvent(sb, done, 0));
    }
    CUBLAS_CHECK(cublasSetStream(handle, sb));
    const float* first = (mode == "chain" || mode == "chain-event") ? c1 : a;
    float* out = mode == "same-out" ? c1 : c2;
    CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, first, m, b, m, &zero, out, m));
    CHECK(cudaDeviceSynchronize());
    CUBLAS_CHECK(cublasDestroy(handle));
    if (mode == "shared-inputs")
        ground_truth("clean", "two gemms of one handle on streams a and b both read A and B and write their own C");
    else if (mode == "same-out")
        ground_truth("race", "two gemms of one handle on streams a and b both write C1: write-after-write");
    else if (mode == "chain")
        ground_truth("race", "gemm on stream b reads C1 that the gemm on stream a writes, nothing orders them: read-after-write");
    else
        ground_truth("clean", "gemm on stream b reads C1 after waiting on an event recorded after the gemm on a that writes it");
    return 0;
}
