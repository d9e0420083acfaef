// Two host threads hand a buffer over with an event: the producer thread records it, the consumer thread's
// stream waits on it (the threads themselves meet through a join).
#include <thread>
#include "common.cuh"
int main() {
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaEvent_t written;
    CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    std::thread producer([&] {
        cudaStream_t a;
        CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
        write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
        CHECK(cudaEventRecord(written, a));
    });
    producer.join();
    std::thread consumer([&] {
        cudaStream_t b;
        CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
        CHECK(cudaStreamWaitEvent(b, written, 0));
        read_kernel<<<256, 256, 0, b>>>(buf, out, N);
        CHECK(cudaStreamSynchronize(b));
    });
    consumer.join();
    ground_truth("clean", "the consumer thread's stream waits on the event the producer thread recorded");
    return 0;
}
