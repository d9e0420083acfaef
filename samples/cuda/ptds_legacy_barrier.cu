// LINK: --default-stream per-thread
// VARIANT: nonblocking
// Built with --default-stream per-thread: write_kernel runs on stream 0, the thread's per-thread default stream,
// which is a blocking stream; then read_kernel runs on cudaStreamLegacy, the legacy default stream, which waits for
// all earlier work of blocking streams (DESIGN.md rule 7: clean). With "nonblocking" the write runs on a stream
// created with cudaStreamNonBlocking, which the legacy default stream does not wait for (race: read-after-write).
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    bool nonblocking = argc > 1 && std::strcmp(argv[1], "nonblocking") == 0;
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t side;
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, nonblocking ? side : 0>>>(buf, N, 1.f);
    read_kernel<<<256, 256, 0, cudaStreamLegacy>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    if (nonblocking)
        ground_truth("race", "write_kernel on a non-blocking stream and read_kernel on cudaStreamLegacy: read-after-write");
    else
        ground_truth("clean", "read_kernel on cudaStreamLegacy waits for write_kernel on the blocking per-thread default stream");
    return 0;
}
