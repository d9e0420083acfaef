// VARIANT: event-query
// VARIANT: no-poll
// A kernel on non-blocking stream a writes buf; the host spins on cudaStreamQuery(a) until it returns cudaSuccess
// (with "event-query": on cudaEventQuery of an event recorded after the write), then launches a reader of buf on
// non-blocking stream b. The successful query orders the read after the write (DESIGN.md rules 5 and 2: clean).
// With "no-poll" the host launches the reader right away (race: read-after-write).
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "stream-query";
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    CHECK(cudaGetLastError());
    cudaError_t status = cudaSuccess;
    if (std::strcmp(mode, "stream-query") == 0) {
        while ((status = cudaStreamQuery(a)) == cudaErrorNotReady) {
        }
    } else if (std::strcmp(mode, "event-query") == 0) {
        CHECK(cudaEventRecord(done, a));
        while ((status = cudaEventQuery(done)) == cudaErrorNotReady) {
        }
    }
    CHECK(status);
    read_kernel<<<256, 256, 0, b>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    if (std::strcmp(mode, "no-poll") == 0)
        ground_truth("race", "write_kernel on stream a and read_kernel on stream b, launched with nothing between them: read-after-write");
    else
        ground_truth("clean", "the host polled until the query returned cudaSuccess before launching the reader on stream b");
    return 0;
}
