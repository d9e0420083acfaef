// A wait issued before the event is recorded: it waits for nothing.
#include "common.cuh"
int main() {
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t written;
    CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    CHECK(cudaStreamWaitEvent(b, written, 0));  // too early: never recorded yet
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    CHECK(cudaEventRecord(written, a));
    read_kernel<<<256, 256, 0, b>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "the wait preceded the record: read_kernel on stream b is unordered with write_kernel on stream a");
    return 0;
}
