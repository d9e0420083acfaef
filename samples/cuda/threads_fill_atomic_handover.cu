// The first thread fills the buffer on its per-thread default stream, synchronizes it and sets a std::atomic
// flag; the second spins on the flag, then fills the buffer on its own per-thread default stream. The program is
// correct, but the capture does not see the flag (no pthread call): the analysis may report the race only as
// ordered only by timing, or by host synchronization the capture cannot see, never as a plain race.
#include <atomic>
#include <thread>
#include "common.cuh"
int main() {
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    std::atomic<bool> filled{false};
    std::thread second([&] {
        while (!filled.load(std::memory_order_acquire)) {
        }
        write_kernel<<<256, 256, 0, cudaStreamPerThread>>>(buf, N, 2.f);
        CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    });
    std::thread first([&] {
        write_kernel<<<256, 256, 0, cudaStreamPerThread>>>(buf, N, 1.f);
        CHECK(cudaStreamSynchronize(cudaStreamPerThread));
        filled.store(true, std::memory_order_release);
    });
    first.join();
    second.join();
    ground_truth("clean", "the first thread synchronizes its stream, then hands the buffer over through a std::atomic flag the capture cannot see (at most a race ordered only by timing, never a plain race)");
    CHECK(cudaFree(buf));
    return 0;
}
