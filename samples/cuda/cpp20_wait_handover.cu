// STD: c++20
// VARIANT: semaphore
// VARIANT: atomic-wait
// VARIANT: barrier
// VARIANT: no-sync
// Two host threads hand a device buffer over through C++20's waits. Thread A fills buf with a kernel on its
// non-blocking stream, synchronizes that stream, and some milliseconds later (so that B is asleep by then)
// signals: it counts a std::latch down (the default), releases a std::binary_semaphore ("semaphore"), stores
// into a std::atomic<int> and notifies it ("atomic-wait"), or arrives at a std::barrier of two ("barrier");
// thread B waits for that signal, then overwrites buf on its own non-blocking stream (clean: A learned the fill
// done before it signalled, and B's launch comes after its wait returns). libstdc++ sleeps and wakes on futexes
// through the C library's syscall, which the capture stands in front of. "no-sync": the latch, without A's
// synchronize (race: write-after-write, the host hand-over orders no GPU work).
#include <atomic>
#include <barrier>
#include <chrono>
#include <latch>
#include <semaphore>
#include <string>
#include <thread>
#include "common.cuh"
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "latch";
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t sa, sb;
    CHECK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    std::latch filled(1);
    std::binary_semaphore handed(0);
    std::atomic<int> ready{0};
    std::barrier<> both(2);
    std::thread b([&] {
        if (mode == "semaphore") {
            handed.acquire();
        } else if (mode == "atomic-wait") {
            ready.wait(0);
        } else if (mode == "barrier") {
            both.arrive_and_wait();
        } else {
            filled.wait();
        }
        write_kernel<<<256, 256, 0, sb>>>(buf, N, 2.f);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(sb));
    });
    std::thread a([&] {
        write_kernel<<<256, 256, 0, sa>>>(buf, N, 1.f);
        CHECK(cudaGetLastError());
        if (mode != "no-sync") CHECK(cudaStreamSynchronize(sa));
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (mode == "semaphore") {
            handed.release();
        } else if (mode == "atomic-wait") {
            ready.store(1);
            ready.notify_one();
        } else if (mode == "barrier") {
            both.arrive_and_wait();
        } else {
            filled.count_down();
        }
    });
    a.join();
    b.join();
    CHECK(cudaDeviceSynchronize());
    if (mode == "no-sync")
        ground_truth("race", "write_kernel on thread A's stream and write_kernel on thread B's stream, handed over by a std::latch before A's stream was synchronized: write-after-write");
    else
        ground_truth("clean", "thread A synchronizes its stream, then signals thread B through a C++20 wait; B overwrites the buffer after its wait returns");
    CHECK(cudaFree(buf));
    return 0;
}
