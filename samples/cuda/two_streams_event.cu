// The race-free twin of two_streams_race.cu: an event orders the second write after the first.
#include "common.cuh"
int main() {
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    CHECK(cudaEventRecord(done, a));
    CHECK(cudaStreamWaitEvent(b, done, 0));
    write_kernel<<<256, 256, 0, b>>>(buf, N, 2.f);
    CHECK(cudaDeviceSynchronize());
    ground_truth("clean", "stream b waits on an event recorded after stream a's write");
    return 0;
}
