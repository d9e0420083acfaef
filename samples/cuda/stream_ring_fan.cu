// VARIANT: broken-link
// VARIANT: fan-in-missing
// Four non-blocking streams pass one buffer around a ring, twice, with ONE event object recorded again at every
// hop: stream i waits on the event (last recorded on stream i-1), writes buf, and records the event (DESIGN.md
// rules 3 and 4: a wait takes the record the event holds at the time of the call). Then a fan-out and fan-in:
// stream 0 records `ready`, streams 1..3 wait on it and read buf, each records its own `done[i]`, and stream 0 waits
// on all three before it overwrites buf. Clean without an argument. "broken-link": in the first round stream 2
// does not wait (race: write-after-write with stream 1's write, and with stream 0's). "fan-in-missing": stream 0
// does not wait on done[3] (race: stream 3's read and stream 0's final write, write-after-read).
#include <string>
#include "common.cuh"
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "ring";
    const int K = 4;
    float *buf, *outs[K];
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    for (int i = 0; i < K; ++i) CHECK(cudaMalloc(&outs[i], 256 * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t s[K];
    for (int i = 0; i < K; ++i) CHECK(cudaStreamCreateWithFlags(&s[i], cudaStreamNonBlocking));
    cudaEvent_t hop, ready, done[K];
    CHECK(cudaEventCreateWithFlags(&hop, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
    for (int i = 0; i < K; ++i) CHECK(cudaEventCreateWithFlags(&done[i], cudaEventDisableTiming));
    bool first = true;
    for (int round = 0; round < 2; ++round) {
        for (int i = 0; i < K; ++i) {
            const bool skip = mode == "broken-link" && round == 0 && i == 2;
            if (!first && !skip) CHECK(cudaStreamWaitEvent(s[i], hop, 0));
            write_kernel<<<256, 256, 0, s[i]>>>(buf, N, float(round * K + i));
            CHECK(cudaGetLastError());
            CHECK(cudaEventRecord(hop, s[i]));
            first = false;
        }
    }
    // The ring ended on stream 3: stream 0 joins it, then fans out.
    CHECK(cudaStreamWaitEvent(s[0], hop, 0));
    CHECK(cudaEventRecord(ready, s[0]));
    for (int i = 1; i < K; ++i) {
        CHECK(cudaStreamWaitEvent(s[i], ready, 0));
        read_kernel<<<256, 256, 0, s[i]>>>(buf, outs[i], N);
        CHECK(cudaGetLastError());
        CHECK(cudaEventRecord(done[i], s[i]));
    }
    for (int i = 1; i < K; ++i)
        if (!(mode == "fan-in-missing" && i == 3)) CHECK(cudaStreamWaitEvent(s[0], done[i], 0));
    write_kernel<<<256, 256, 0, s[0]>>>(buf, N, 9.f);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    if (mode == "ring")
        ground_truth("clean", "a ring of four streams, each waiting on one event re-recorded at every hop, then a fan-out to three readers and a fan-in before the last write");
    else if (mode == "broken-link")
        ground_truth("race", "stream 2 writes buf in the first round without waiting on the hop event: write-after-write with streams 1 and 0");
    else
        ground_truth("race", "stream 0 overwrites buf without waiting on done[3]: write-after-read with stream 3's read_kernel");
    return 0;
}
