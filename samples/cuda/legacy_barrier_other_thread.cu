// VARIANT: nonblocking
// Thread A launches write_kernel on a blocking stream (cudaStreamCreate) and then tells thread B through a
// condition variable; thread B launches read_kernel on the legacy default stream, which waits for all earlier
// work of every blocking stream of the context, whichever thread issued it (DESIGN.md rule 7; the hand-over puts
// A's launch first: clean). With "nonblocking" A's stream is made with cudaStreamNonBlocking (race:
// read-after-write).
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include "common.cuh"
int main(int argc, char** argv) {
    bool nonblocking = argc > 1 && std::strcmp(argv[1], "nonblocking") == 0;
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, nonblocking ? cudaStreamNonBlocking : cudaStreamDefault));
    std::mutex lock;
    std::condition_variable told;
    bool launched = false;
    std::thread b([&] {
        {
            std::unique_lock<std::mutex> held(lock);
            told.wait(held, [&] { return launched; });
        }
        read_kernel<<<256, 256>>>(buf, out, N);
        CHECK(cudaStreamSynchronize(0));
    });
    std::thread a([&] {
        write_kernel<<<256, 256, 0, s>>>(buf, N, 1.f);
        CHECK(cudaGetLastError());
        {
            std::lock_guard<std::mutex> held(lock);
            launched = true;
        }
        told.notify_one();
    });
    a.join();
    b.join();
    CHECK(cudaDeviceSynchronize());
    if (nonblocking)
        ground_truth("race", "write_kernel on thread A's non-blocking stream and read_kernel on the legacy default stream in thread B: read-after-write");
    else
        ground_truth("clean", "thread B's legacy-default-stream read_kernel waits for thread A's earlier write_kernel on a blocking stream");
    return 0;
}
