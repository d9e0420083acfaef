// The first thread fills the buffer on its per-thread default stream, synchronizes it and sets a flag under a
// mutex; the second waits for the flag on a condition variable under that mutex, then fills the buffer on its own
// per-thread default stream. The mutex orders them: the capture records its unlock and lock.
#include <condition_variable>
#include <mutex>
#include <thread>
#include "common.cuh"
int main() {
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    std::mutex lock;
    std::condition_variable handed;
    bool filled = false;
    std::thread second([&] {
        {
            std::unique_lock<std::mutex> held(lock);
            handed.wait(held, [&] { return filled; });
        }
        write_kernel<<<256, 256, 0, cudaStreamPerThread>>>(buf, N, 2.f);
        CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    });
    std::thread first([&] {
        write_kernel<<<256, 256, 0, cudaStreamPerThread>>>(buf, N, 1.f);
        CHECK(cudaStreamSynchronize(cudaStreamPerThread));
        {
            std::lock_guard<std::mutex> held(lock);
            filled = true;
        }
        handed.notify_one();
    });
    first.join();
    second.join();
    ground_truth("clean", "the first thread synchronizes its stream, then hands the buffer over through a mutex-protected flag");
    CHECK(cudaFree(buf));
    return 0;
}
