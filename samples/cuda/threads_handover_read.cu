// VARIANT: no-sync
// VARIANT: host-func
// VARIANT: host-func-other-stream
// VARIANT: managed
// VARIANT: managed-no-sync
// A worker thread waits on a condition variable until a result is handed over, then reads it from host memory.
// The host watch sees that read as a fault, which the capture makes a record later, on whichever thread takes
// its lock next: the record must come after the worker's acquire of the handover, or the read looks unordered.
// Without an argument: write_kernel and a cudaMemcpyAsync into pinned memory on a non-blocking stream, then the
// main thread synchronizes the stream and hands over under the mutex (clean; the guard is lifted at the
// synchronization, so the read may not fault at all). "no-sync": the same without cudaStreamSynchronize (race).
// "host-func": a host function enqueued after the copy on its stream hands over (clean: the stream runs it once
// the copy is done, and the read faults, the guard being up until the host synchronizes). "host-func-other-stream":
// the host function is enqueued on another stream, which nothing orders after the copy (race). "managed": the
// kernel writes managed memory, the worker issues a kernel of its own (so that the managed fault, which names no
// thread, is given to it: the thread that issued work last), then the main thread synchronizes and hands over
// (clean). "managed-no-sync": the same without the synchronization (race).
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include "common.cuh"

namespace {
std::mutex lock;
std::condition_variable changed;
int stage = 0;  // 1: the worker may launch its own kernel (managed), 2: it did, 3: the result is handed over

void set_stage(int value) {
    {
        std::lock_guard<std::mutex> held(lock);
        stage = value;
    }
    changed.notify_all();
}

void wait_for_stage(int value) {
    std::unique_lock<std::mutex> held(lock);
    changed.wait(held, [&] { return stage >= value; });
}

void CUDART_CB hand_over(void*) { set_stage(3); }
}  // namespace

int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "sync";
    const bool managed = mode.rfind("managed", 0) == 0;
    const bool host_func = mode.rfind("host-func", 0) == 0;
    const bool synced = mode == "sync" || mode == "managed";
    if (managed) {
        int device = 0, concurrent = 0;
        CHECK(cudaGetDevice(&device));
        CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device));
        if (!concurrent) {
            std::printf("this device has no concurrent managed access: nothing to show\n");
            return 0;
        }
    }
    float *dev, *host, *own;
    CHECK(cudaMalloc(&dev, N * sizeof(float)));
    CHECK(cudaMalloc(&own, N * sizeof(float)));
    if (managed)
        CHECK(cudaMallocManaged(&host, N * sizeof(float)));
    else
        CHECK(cudaMallocHost(&host, N * sizeof(float)));
    cudaStream_t s, other, worker_stream;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&worker_stream, cudaStreamNonBlocking));
    float seen = 0.f;
    std::thread worker([&] {
        if (managed) {
            wait_for_stage(1);
            write_kernel<<<256, 256, 0, worker_stream>>>(own, N, 5.f);
            CHECK(cudaGetLastError());
            set_stage(2);
        }
        wait_for_stage(3);
        seen = static_cast<volatile float*>(host)[N / 2];
    });
    if (managed) {
        write_kernel<<<256, 256, 0, s>>>(host, N, 3.f);
        CHECK(cudaGetLastError());
        set_stage(1);
        wait_for_stage(2);
    } else {
        write_kernel<<<256, 256, 0, s>>>(dev, N, 3.f);
        CHECK(cudaMemcpyAsync(host, dev, N * sizeof(float), cudaMemcpyDeviceToHost, s));
    }
    if (host_func) {
        CHECK(cudaLaunchHostFunc(mode == "host-func" ? s : other, hand_over, nullptr));
    } else {
        if (synced) CHECK(cudaStreamSynchronize(s));
        set_stage(3);
    }
    worker.join();
    CHECK(cudaDeviceSynchronize());
    const bool clean = synced || mode == "host-func";
    if (clean) std::printf("host[N/2] = %.1f\n", seen);
    const char* what = mode == "sync"       ? "the main thread synchronizes the copy's stream, then hands the pinned buffer over to the worker through a mutex and condition variable"
                       : mode == "no-sync"  ? "cudaMemcpyAsync DtoH into pinned host and the worker's read of it, handed over before anything waited: read-after-write"
                       : mode == "host-func" ? "a host function enqueued after the copy on its stream hands the pinned buffer over to the worker"
                       : mode == "host-func-other-stream" ? "cudaMemcpyAsync DtoH into pinned host and the worker's read of it, handed over by a host function on another stream: read-after-write"
                       : mode == "managed"  ? "the main thread synchronizes the kernel's stream, then hands the managed buffer over to the worker, which issued a kernel of its own before"
                                            : "write_kernel into managed memory and the worker's read of it, handed over before anything waited: read-after-write";
    ground_truth(clean ? "clean" : "race", what);
    CHECK(cudaFree(dev));
    CHECK(cudaFree(own));
    if (managed)
        CHECK(cudaFree(host));
    else
        CHECK(cudaFreeHost(host));
    return 0;
}
