// VARIANT: own-stream-sync
// Thread A writes buf with a kernel on non-blocking stream a and signals thread B through a condition variable
// (under a mutex). Thread B calls cudaDeviceSynchronize, which waits for all earlier work of the device, A's
// kernel included (the hand-over put A's launch before it), then reads buf on its own non-blocking stream b
// (clean). With "own-stream-sync" B synchronizes only its stream b, which waits for nothing of a (race:
// read-after-write).
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include "common.cuh"
int main(int argc, char** argv) {
    bool device_sync = !(argc > 1 && std::strcmp(argv[1], "own-stream-sync") == 0);
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    std::mutex lock;
    std::condition_variable signalled;
    bool launched = false;
    std::thread reader([&] {
        {
            std::unique_lock<std::mutex> held(lock);
            signalled.wait(held, [&] { return launched; });
        }
        if (device_sync)
            CHECK(cudaDeviceSynchronize());
        else
            CHECK(cudaStreamSynchronize(b));
        read_kernel<<<256, 256, 0, b>>>(buf, out, N);
        CHECK(cudaStreamSynchronize(b));
    });
    std::thread writer([&] {
        write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
        CHECK(cudaGetLastError());
        {
            std::lock_guard<std::mutex> held(lock);
            launched = true;
        }
        signalled.notify_one();
    });
    writer.join();
    reader.join();
    CHECK(cudaDeviceSynchronize());
    if (device_sync)
        ground_truth("clean", "thread B's cudaDeviceSynchronize, after the hand-over, waits for thread A's kernel before B's reader is launched");
    else
        ground_truth("race", "thread B synchronizes only its own stream b: write_kernel on a and read_kernel on b unordered: read-after-write");
    return 0;
}
