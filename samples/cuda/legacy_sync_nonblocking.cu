// VARIANT: nb-sync
// VARIANT: legacy-sync-nb-work
// VARIANT: legacy-sync-blocking-work
// VARIANT: legacy-query-blocking-work
// cudaStreamSynchronize of the legacy default stream and of a non-blocking stream, against work of the other kind
// (DESIGN.md rules 5 and 7). Without an argument write_kernel runs on the legacy default stream, the host calls
// cudaStreamSynchronize(0), then overwrites buf on a non-blocking stream (clean). "nb-sync": the host synchronizes
// an idle non-blocking stream instead, which waits for nothing of the legacy stream (race: write-after-write).
// "legacy-sync-nb-work": the first write runs on non-blocking stream nb1, the host synchronizes the legacy stream,
// which does not wait for non-blocking streams (race). "legacy-sync-blocking-work": the first write runs on a
// blocking stream (cudaStreamCreate); synchronizing the legacy stream waits for it (clean). "legacy-query-blocking-work":
// the same, with cudaStreamQuery(0) polled until it returns cudaSuccess instead of cudaStreamSynchronize(0) (clean).
#include <string>
#include "common.cuh"
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "legacy-sync";
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t nb1, nb2, blocking;
    CHECK(cudaStreamCreateWithFlags(&nb1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&nb2, cudaStreamNonBlocking));
    CHECK(cudaStreamCreate(&blocking));
    cudaStream_t first = mode == "legacy-sync-nb-work" ? nb1 : (mode == "legacy-sync-blocking-work" || mode == "legacy-query-blocking-work") ? blocking : cudaStream_t(0);
    write_kernel<<<256, 256, 0, first>>>(buf, N, 1.f);
    CHECK(cudaGetLastError());
    if (mode == "legacy-query-blocking-work") {
        cudaError_t status;
        while ((status = cudaStreamQuery(0)) == cudaErrorNotReady) {
        }
        CHECK(status);
    } else {
        CHECK(cudaStreamSynchronize(mode == "nb-sync" ? nb1 : cudaStream_t(0)));
    }
    write_kernel<<<256, 256, 0, nb2>>>(buf, N, 2.f);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    if (mode == "legacy-sync")
        ground_truth("clean", "the host synchronizes the legacy default stream after its write_kernel, then overwrites buf on a non-blocking stream");
    else if (mode == "nb-sync")
        ground_truth("race", "write_kernel on the legacy default stream and on non-blocking nb2, the host having synchronized only idle nb1: write-after-write");
    else if (mode == "legacy-sync-nb-work")
        ground_truth("race", "write_kernel on non-blocking nb1 and on nb2, the host having synchronized only the legacy default stream: write-after-write");
    else if (mode == "legacy-query-blocking-work")
        ground_truth("clean", "cudaStreamQuery(0) returned success, so the blocking stream's write_kernel is done; then nb2 overwrites buf");
    else
        ground_truth("clean", "cudaStreamSynchronize(0) waits for the blocking stream's write_kernel, then nb2 overwrites buf");
    return 0;
}
