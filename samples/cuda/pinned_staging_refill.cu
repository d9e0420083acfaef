// VARIANT: event-sync
// A pinned staging buffer is uploaded with cudaMemcpyAsync, then refilled by the host for the next upload.
// Without an argument the host refills it while the upload is still queued (race: the capture guards the source
// against writes while the copy is in flight and sees the first store fault: write-after-read); with "event-sync"
// it refills after cudaEventSynchronize of an event recorded after the upload (clean).
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    bool synced = argc > 1 && std::strcmp(argv[1], "event-sync") == 0;
    float *dev, *staging;
    CHECK(cudaMalloc(&dev, N * sizeof(float)));
    CHECK(cudaHostAlloc(&staging, N * sizeof(float), cudaHostAllocDefault));
    for (int i = 0; i < N; ++i) staging[i] = float(i);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t uploaded;
    CHECK(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming));
    CHECK(cudaMemcpyAsync(dev, staging, N * sizeof(float), cudaMemcpyHostToDevice, s));
    CHECK(cudaEventRecord(uploaded, s));
    if (synced) CHECK(cudaEventSynchronize(uploaded));
    for (int i = 0; i < N; ++i) staging[i] = float(2 * i);
    CHECK(cudaMemcpyAsync(dev, staging, N * sizeof(float), cudaMemcpyHostToDevice, s));
    CHECK(cudaStreamSynchronize(s));
    if (synced)
        ground_truth("clean", "the host refills the staging buffer after cudaEventSynchronize of the upload's event");
    else
        ground_truth("race", "cudaMemcpyAsync HtoD from the pinned staging buffer and the host's refill while it is queued: write-after-read");
    return 0;
}
