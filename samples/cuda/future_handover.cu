// VARIANT: no-sync
// VARIANT: cv
// VARIANT: late-get
// Two host threads hand a device buffer over through std::promise / std::future (a task graph's hand-over). Thread
// A fills buf with a kernel on its non-blocking stream, synchronizes that stream and sets the promise; thread B
// waits on the future, then overwrites buf on its own non-blocking stream (clean: A learned the fill done before
// the promise was set, and B's launch comes after it returns from get()). A sets the promise some milliseconds
// after its synchronize, so that B is asleep in get() by then: libstdc++ wakes it through its futex functions,
// which the capture stands in front of. "no-sync": A sets the promise without synchronizing (race:
// write-after-write, the host hand-over orders no GPU work). "cv": the same hand-over as the default through a
// mutex and std::condition_variable instead (clean). "late-get": B calls get() only after A set the promise
// (clean too, but get() then finds the value ready and calls nothing: the capture cannot see that hand-over, and
// reports the pair as ordered only by timing).
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include "common.cuh"
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "future";
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t sa, sb;
    CHECK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    std::promise<float*> promise;
    std::future<float*> future = promise.get_future();
    std::mutex lock;
    std::condition_variable ready_cv;
    float* handed = nullptr;
    std::thread b([&] {
        float* got;
        if (mode == "cv") {
            std::unique_lock<std::mutex> held(lock);
            ready_cv.wait(held, [&] { return handed != nullptr; });
            got = handed;
        } else {
            if (mode == "late-get") std::this_thread::sleep_for(std::chrono::milliseconds(50));
            got = future.get();
        }
        write_kernel<<<256, 256, 0, sb>>>(got, N, 2.f);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(sb));
    });
    std::thread a([&] {
        write_kernel<<<256, 256, 0, sa>>>(buf, N, 1.f);
        CHECK(cudaGetLastError());
        if (mode != "no-sync") CHECK(cudaStreamSynchronize(sa));
        if (mode == "cv") {
            {
                std::lock_guard<std::mutex> held(lock);
                handed = buf;
            }
            ready_cv.notify_one();
        } else {
            if (mode != "late-get") std::this_thread::sleep_for(std::chrono::milliseconds(20));
            promise.set_value(buf);
        }
    });
    a.join();
    b.join();
    CHECK(cudaDeviceSynchronize());
    if (mode == "no-sync")
        ground_truth("race", "write_kernel on thread A's stream and write_kernel on thread B's stream, handed over by a std::future before anything waited: write-after-write");
    else if (mode == "cv")
        ground_truth("clean", "thread A synchronizes its stream, then hands the buffer over through a condition variable; thread B overwrites it");
    else if (mode == "late-get")
        ground_truth("clean", "thread A synchronizes its stream, then sets the promise; thread B calls future.get() after that and overwrites the buffer");
    else
        ground_truth("clean", "thread A synchronizes its stream, then sets the promise; thread B overwrites the buffer after future.get()");
    return 0;
}
