// VARIANT: early-event
// The main thread records an event after a kernel that writes buf on non-blocking stream a and passes the event to
// a worker thread (mutex and condition variable); the worker calls cudaEventSynchronize on it (the thread that
// synchronizes is not the one that recorded) and reports back the same way; then the main thread overwrites buf on
// non-blocking stream b (clean: DESIGN.md rules 5 and 10, the worker learned the write done and the hand-back
// carries that to the main thread). "early-event": the event is recorded before the kernel, so the worker's
// synchronization covers nothing of it (race: write-after-write between a's and b's kernels).
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include "common.cuh"
int main(int argc, char** argv) {
    const bool early = argc > 1 && std::string(argv[1]) == "early-event";
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t event;
    CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    std::mutex lock;
    std::condition_variable changed;
    int stage = 0;  // 1: the event is recorded, 2: the worker synchronized it
    std::thread worker([&] {
        {
            std::unique_lock<std::mutex> held(lock);
            changed.wait(held, [&] { return stage >= 1; });
        }
        CHECK(cudaEventSynchronize(event));
        {
            std::lock_guard<std::mutex> held(lock);
            stage = 2;
        }
        changed.notify_all();
    });
    if (early) CHECK(cudaEventRecord(event, a));
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    CHECK(cudaGetLastError());
    if (!early) CHECK(cudaEventRecord(event, a));
    {
        std::lock_guard<std::mutex> held(lock);
        stage = 1;
    }
    changed.notify_all();
    {
        std::unique_lock<std::mutex> held(lock);
        changed.wait(held, [&] { return stage >= 2; });
    }
    write_kernel<<<256, 256, 0, b>>>(buf, N, 2.f);
    CHECK(cudaGetLastError());
    worker.join();
    CHECK(cudaDeviceSynchronize());
    if (early)
        ground_truth("race", "the worker synchronizes an event recorded before a's write_kernel; b's write_kernel then overwrites buf: write-after-write");
    else
        ground_truth("clean", "a worker thread synchronizes the event recorded after a's write and hands back to the main thread, which then overwrites buf on b");
    return 0;
}
