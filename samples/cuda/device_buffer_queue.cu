// VARIANT: no-ready-wait
// VARIANT: no-free-wait
// A producer/consumer queue of device buffers across two host threads (a pipeline's shape): two buffers, eight
// items. The producer thread takes a free buffer from the free queue, makes its stream wait on the buffer's
// `consumed` event (once the consumer recorded it), fills the buffer on its non-blocking stream, records the buffer's
// `ready` event and pushes the buffer onto the ready queue; the consumer thread pops it, makes its stream wait on
// `ready`, reads it on its own non-blocking stream, records `consumed` and pushes the buffer back onto the free
// queue. Both queues sit under one mutex with a condition variable. Clean without an argument. "no-ready-wait":
// the consumer does not wait on `ready` (race: read-after-write). "no-free-wait": the producer does not wait on
// `consumed` before refilling (race: write-after-read, from the third item on).
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include "common.cuh"
struct Slot {
    float* buf;
    cudaEvent_t ready, consumed;
    bool consumed_recorded = false;
};
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "queue";
    const int items = 8;
    Slot slots[2];
    for (Slot& slot : slots) {
        CHECK(cudaMalloc(&slot.buf, N * sizeof(float)));
        CHECK(cudaEventCreateWithFlags(&slot.ready, cudaEventDisableTiming));
        CHECK(cudaEventCreateWithFlags(&slot.consumed, cudaEventDisableTiming));
    }
    float* out;
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t ps, cs;
    CHECK(cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking));
    std::mutex lock;
    std::condition_variable changed;
    std::deque<int> free_q{0, 1}, ready_q;
    auto pop = [&](std::deque<int>& q) {
        std::unique_lock<std::mutex> held(lock);
        changed.wait(held, [&] { return !q.empty(); });
        int i = q.front();
        q.pop_front();
        return i;
    };
    auto push = [&](std::deque<int>& q, int i) {
        {
            std::lock_guard<std::mutex> held(lock);
            q.push_back(i);
        }
        changed.notify_all();
    };
    std::thread producer([&] {
        for (int k = 0; k < items; ++k) {
            int i = pop(free_q);
            bool recorded;
            {
                std::lock_guard<std::mutex> held(lock);
                recorded = slots[i].consumed_recorded;
            }
            if (recorded && mode != "no-free-wait") CHECK(cudaStreamWaitEvent(ps, slots[i].consumed, 0));
            write_kernel<<<256, 256, 0, ps>>>(slots[i].buf, N, float(k));
            CHECK(cudaGetLastError());
            CHECK(cudaEventRecord(slots[i].ready, ps));
            push(ready_q, i);
        }
    });
    std::thread consumer([&] {
        for (int k = 0; k < items; ++k) {
            int i = pop(ready_q);
            if (mode != "no-ready-wait") CHECK(cudaStreamWaitEvent(cs, slots[i].ready, 0));
            read_kernel<<<256, 256, 0, cs>>>(slots[i].buf, out, N);
            CHECK(cudaGetLastError());
            CHECK(cudaEventRecord(slots[i].consumed, cs));
            {
                std::lock_guard<std::mutex> held(lock);
                slots[i].consumed_recorded = true;
            }
            push(free_q, i);
        }
    });
    producer.join();
    consumer.join();
    CHECK(cudaDeviceSynchronize());
    if (mode == "queue")
        ground_truth("clean", "each buffer is read after its ready event and refilled after its consumed event, handed between threads through mutex-guarded queues");
    else if (mode == "no-ready-wait")
        ground_truth("race", "the consumer reads a buffer without waiting on its ready event: read-after-write with the producer's write_kernel");
    else
        ground_truth("race", "the producer refills a buffer without waiting on its consumed event: write-after-read with the consumer's read_kernel");
    return 0;
}
