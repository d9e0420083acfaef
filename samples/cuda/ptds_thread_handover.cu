// LINK: --default-stream per-thread
// VARIANT: stream-sync
// VARIANT: mutex-only
// Built with --default-stream per-thread: stream 0 (and every non-Async copy) is the calling thread's own
// per-thread default stream. The first thread fills buf on its stream 0 and hands it over through a flag under a
// mutex; the second waits for the flag and fills buf on its own stream 0. Without an argument the first thread
// records an event on its stream 0 before the hand-over and the second thread's stream 0 waits on it (clean); with
// "stream-sync" the first thread calls cudaStreamSynchronize(0) before the hand-over (clean); with "mutex-only"
// only the mutex hands over (race: the two per-thread default streams are different streams, and the first
// thread's kernel may still run: write-after-write).
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include "common.cuh"
int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "event";
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t filled_event;
    CHECK(cudaEventCreateWithFlags(&filled_event, cudaEventDisableTiming));
    std::mutex lock;
    std::condition_variable handed;
    bool filled = false;
    std::thread second([&] {
        {
            std::unique_lock<std::mutex> held(lock);
            handed.wait(held, [&] { return filled; });
        }
        if (std::strcmp(mode, "event") == 0) CHECK(cudaStreamWaitEvent(0, filled_event, 0));
        write_kernel<<<256, 256>>>(buf, N, 2.f);
        CHECK(cudaStreamSynchronize(0));
    });
    std::thread first([&] {
        write_kernel<<<256, 256>>>(buf, N, 1.f);
        if (std::strcmp(mode, "event") == 0) CHECK(cudaEventRecord(filled_event, 0));
        if (std::strcmp(mode, "stream-sync") == 0) CHECK(cudaStreamSynchronize(0));
        {
            std::lock_guard<std::mutex> held(lock);
            filled = true;
        }
        handed.notify_one();
    });
    first.join();
    second.join();
    if (std::strcmp(mode, "mutex-only") == 0)
        ground_truth("race", "two threads fill buf on their own per-thread default streams, handed over through a mutex alone: write-after-write");
    else
        ground_truth("clean", "the second thread's per-thread default stream is ordered after the first's write (event wait or stream sync before the hand-over)");
    CHECK(cudaFree(buf));
    return 0;
}
