// LINK: -lcublas -lcublasLt
// VARIANT: cross
// VARIANT: cross-event
// VARIANT: shared-workspace
// VARIANT: overlap
// VARIANT: graph
// VARIANT: graph-cross
// Two non-blocking streams, each with its own cuBLAS handle, split one layer between them by rows, as code that
// spreads a batch over streams does. Stream 1 computes the top half of Y = W X (cublasGemmEx), stream 2 the
// bottom half (cublasSgemm): both read all of X and their own rows of W, and write their own rows of Y, one
// allocation whose halves are sub-matrices (leading dimension d, h rows each). Both take alpha and beta from
// one device buffer (pointer mode device). Then each stream computes Z = Yhalf V with cuBLASLt
// (cublasLtMatmul), into its own rows of Z, with a workspace of its own. Without an argument: clean (the
// streams share only what both read, and write rows apart). "cross": stream 2's cuBLASLt matmul reads stream
// 1's half of Y with nothing ordering it after stream 1's gemm (race: read-after-write). "cross-event": the
// same after stream 2 waits on an event recorded after that gemm (clean). "shared-workspace": both cuBLASLt
// matmuls are given one workspace (race: write-after-write, cuBLASLt may use all of it). "overlap": stream 2's
// gemm starts 8 rows into stream 1's half of Y (race: write-after-write). "graph": the same work captured from
// stream 1 into one CUDA graph (stream 2 forked from it by an event and joined back), launched twice (clean: the
// graph's two branches share only what both read). "graph-cross": that graph with stream 2's matmul reading
// stream 1's rows of Y (race between the two branches' nodes: read-after-write). A second argument "unsynced-setup"
// leaves out the synchronize after the set-up (race besides: the gemms read the scalars that a copy from pageable
// memory on the legacy default stream may still be writing, read-after-write).
#include <cublasLt.h>
#include <cublas_v2.h>
#include <string>
#include "common.cuh"
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "clean";
    const bool synced_setup = !(argc > 2 && std::string(argv[2]) == "unsynced-setup");
    const int d = 512, h = d / 2, n = 256;
    const size_t workspace_bytes = 4 << 20;
    float *w, *x, *y, *v, *z, *scalars;
    void *ws1, *ws2;
    CHECK(cudaMalloc(&w, size_t(d) * d * sizeof(float)));
    CHECK(cudaMalloc(&x, size_t(d) * n * sizeof(float)));
    CHECK(cudaMalloc(&y, size_t(d) * n * sizeof(float)));
    CHECK(cudaMalloc(&v, size_t(n) * n * sizeof(float)));
    CHECK(cudaMalloc(&z, size_t(d) * n * sizeof(float)));
    CHECK(cudaMalloc(&scalars, 2 * sizeof(float)));
    CHECK(cudaMalloc(&ws1, workspace_bytes));
    CHECK(cudaMalloc(&ws2, workspace_bytes));
    CHECK(cudaMemset(w, 0, size_t(d) * d * sizeof(float)));
    CHECK(cudaMemset(x, 0, size_t(d) * n * sizeof(float)));
    CHECK(cudaMemset(v, 0, size_t(n) * n * sizeof(float)));
    const float host_scalars[2] = {1.f, 0.f};
    CHECK(cudaMemcpy(scalars, host_scalars, sizeof(host_scalars), cudaMemcpyHostToDevice));
    // A copy from pageable memory may return before it lands, and the streams below do not wait for the legacy
    // default stream (non-blocking): without this the gemms race with the copy of their scalars.
    if (synced_setup) CHECK(cudaDeviceSynchronize());
    cudaStream_t s1, s2;
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t top_done;
    CHECK(cudaEventCreateWithFlags(&top_done, cudaEventDisableTiming));
    cublasHandle_t h1, h2;
    CUBLAS_CHECK(cublasCreate(&h1));
    CUBLAS_CHECK(cublasCreate(&h2));
    CUBLAS_CHECK(cublasSetStream(h1, s1));
    CUBLAS_CHECK(cublasSetStream(h2, s2));
    CUBLAS_CHECK(cublasSetPointerMode(h1, CUBLAS_POINTER_MODE_DEVICE));
    CUBLAS_CHECK(cublasSetPointerMode(h2, CUBLAS_POINTER_MODE_DEVICE));
    const float* one = scalars;
    const float* zero = scalars + 1;

    // cuBLASLt's descriptors, made before any capture: Z[rows] = Y[rows] V, each stream on its own rows.
    cublasLtHandle_t lt;
    CUBLAS_CHECK(cublasLtCreate(&lt));
    cublasLtMatmulDesc_t desc;
    CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtMatrixLayout_t half, square;
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&half, CUDA_R_32F, h, n, d));
    CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&square, CUDA_R_32F, n, n, n));
    const float host_one = 1.f, host_zero = 0.f;
    auto matmul = [&](const float* in, float* out, void* ws, cudaStream_t s) {
        CUBLAS_CHECK(cublasLtMatmul(lt, desc, &host_one, in, half, v, square, &host_zero, out, half, out, half, nullptr,
                                    ws, workspace_bytes, s));
    };
    const bool graph = mode == "graph" || mode == "graph-cross";
    auto layer = [&]() {
        // Y[0:h] = W[0:h] X on stream 1; Y[h:d] = W[h:d] X on stream 2 ("overlap": from row h - 8).
        CUBLAS_CHECK(cublasGemmEx(h1, CUBLAS_OP_N, CUBLAS_OP_N, h, n, d, one, w, CUDA_R_32F, d, x, CUDA_R_32F, d, zero,
                                  y, CUDA_R_32F, d, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        if (mode == "cross-event") {
            CHECK(cudaEventRecord(top_done, s1));
            CHECK(cudaStreamWaitEvent(s2, top_done, 0));
        }
        const int first = mode == "overlap" ? h - 8 : h;
        CUBLAS_CHECK(cublasSgemm(h2, CUBLAS_OP_N, CUBLAS_OP_N, d - first, n, d, one, w + first, d, x, d, zero,
                                 y + first, d));
        // "cross": stream 2 reads stream 1's rows of Y.
        matmul(y, z, ws1, s1);
        const bool cross = mode == "cross" || mode == "cross-event" || mode == "graph-cross";
        matmul(cross ? y : y + h, z + h, mode == "shared-workspace" ? ws1 : ws2, s2);
    };
    if (graph) {
        cudaEvent_t fork, join;
        CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
        CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
        cudaGraph_t captured;
        CHECK(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal));
        CHECK(cudaEventRecord(fork, s1));
        CHECK(cudaStreamWaitEvent(s2, fork, 0));
        layer();
        CHECK(cudaEventRecord(join, s2));
        CHECK(cudaStreamWaitEvent(s1, join, 0));
        CHECK(cudaStreamEndCapture(s1, &captured));
        cudaGraphExec_t exec;
        CHECK(cudaGraphInstantiate(&exec, captured, 0));
        for (int launch = 0; launch < 2; ++launch) CHECK(cudaGraphLaunch(exec, s1));
        CHECK(cudaStreamSynchronize(s1));
        CHECK(cudaGraphExecDestroy(exec));
        CHECK(cudaGraphDestroy(captured));
    } else {
        layer();
    }
    CHECK(cudaDeviceSynchronize());
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(half));
    CUBLAS_CHECK(cublasLtMatrixLayoutDestroy(square));
    CUBLAS_CHECK(cublasLtMatmulDescDestroy(desc));
    CUBLAS_CHECK(cublasLtDestroy(lt));
    CUBLAS_CHECK(cublasDestroy(h1));
    CUBLAS_CHECK(cublasDestroy(h2));
    if (!synced_setup)
        ground_truth("race", "the gemms read the device scalars that a pageable copy on the legacy default stream may still be writing: read-after-write (and the mode's own race, if any)");
    else if (mode == "cross")
        ground_truth("race", "stream 2's cuBLASLt matmul reads stream 1's rows of Y, unordered after the gemm that writes them: read-after-write");
    else if (mode == "shared-workspace")
        ground_truth("race", "the two streams' cuBLASLt matmuls are given one workspace: write-after-write");
    else if (mode == "overlap")
        ground_truth("race", "stream 2's gemm writes 8 rows of stream 1's half of Y: write-after-write");
    else if (mode == "graph-cross")
        ground_truth("race", "in the graph, stream 2's branch reads stream 1's rows of Y with no edge after the gemm that writes them: read-after-write");
    else if (mode == "cross-event")
        ground_truth("clean", "stream 2 reads stream 1's rows of Y after waiting on an event recorded after the gemm that writes them");
    else if (graph)
        ground_truth("clean", "the graph's two branches read W, X, V and the scalars, and write their own rows of Y and Z with workspaces of their own");
    else
        ground_truth("clean", "two streams read W, X, V and the scalars, and write their own rows of Y and Z with workspaces of their own");
    return 0;
}
