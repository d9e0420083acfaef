// VARIANT: apart
// Two host threads fill one buffer, each on its own per-thread default stream, and nothing hands the buffer over
// between them: a race whatever the timing. They start together (a spin on an atomic the capture does not see,
// so it orders nothing for it either); with `apart` the second sleeps until the first has synchronized, so that
// the calls' timestamps have them ordered and only the recorded host synchronization (none) tells the truth: the
// race is then reported as ordered only by timing, or by host synchronization the capture cannot see.
#include <atomic>
#include <chrono>
#include <cstring>
#include <thread>
#include "common.cuh"
int main(int argc, char** argv) {
    const bool apart = argc > 1 && std::strcmp(argv[1], "apart") == 0;
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    std::atomic<int> ready{0};
    auto fill = [&](float value, bool later) {
        ready.fetch_add(1);
        while (ready.load() < 2) {
        }
        if (later && apart) std::this_thread::sleep_for(std::chrono::milliseconds(200));
        write_kernel<<<256, 256, 0, cudaStreamPerThread>>>(buf, N, value);
        CHECK(cudaStreamSynchronize(cudaStreamPerThread));
    };
    std::thread first(fill, 1.f, false), second(fill, 2.f, true);
    first.join();
    second.join();
    if (apart) {
        ground_truth("race", "the second thread fills the buffer 200 ms after the first synchronized, with no host synchronization between them (reported as ordered only by timing)");
    } else {
        ground_truth("race", "two threads fill one buffer on their per-thread default streams at once, with no host synchronization between them");
    }
    CHECK(cudaFree(buf));
    return 0;
}
