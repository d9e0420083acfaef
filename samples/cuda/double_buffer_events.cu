// VARIANT: no-war-wait
// A double-buffered producer/consumer over two non-blocking streams, six iterations, two events per buffer
// recorded again every iteration: the producer writes bufs[i % 2] and records ready[i % 2]; the consumer waits on
// it, reads the buffer and records consumed[i % 2]. From the third iteration on the producer first waits on
// consumed[i % 2], so it never overwrites a buffer the consumer still reads (clean). With "no-war-wait" it does not
// (race: the producer's write of iteration i + 2 and the consumer's read of iteration i: write-after-read).
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    bool war_wait = !(argc > 1 && std::strcmp(argv[1], "no-war-wait") == 0);
    float *bufs[2], *out;
    for (auto& b : bufs) CHECK(cudaMalloc(&b, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t producer, consumer;
    CHECK(cudaStreamCreateWithFlags(&producer, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&consumer, cudaStreamNonBlocking));
    cudaEvent_t ready[2], consumed[2];
    for (int k = 0; k < 2; ++k) {
        CHECK(cudaEventCreateWithFlags(&ready[k], cudaEventDisableTiming));
        CHECK(cudaEventCreateWithFlags(&consumed[k], cudaEventDisableTiming));
    }
    for (int i = 0; i < 6; ++i) {
        int k = i % 2;
        if (war_wait && i >= 2) CHECK(cudaStreamWaitEvent(producer, consumed[k], 0));
        write_kernel<<<256, 256, 0, producer>>>(bufs[k], N, float(i));
        CHECK(cudaEventRecord(ready[k], producer));
        CHECK(cudaStreamWaitEvent(consumer, ready[k], 0));
        read_kernel<<<256, 256, 0, consumer>>>(bufs[k], out, N);
        CHECK(cudaEventRecord(consumed[k], consumer));
    }
    CHECK(cudaDeviceSynchronize());
    if (war_wait)
        ground_truth("clean", "the consumer waits on ready[k] (RAW) and the producer on consumed[k] (WAR), both recorded again every iteration");
    else
        ground_truth("race", "the producer's write_kernel of iteration i + 2 overwrites bufs[i % 2] while the consumer's read_kernel of iteration i may read it: write-after-read");
    return 0;
}
