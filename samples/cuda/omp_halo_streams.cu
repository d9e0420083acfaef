// LINK: -Xcompiler -fopenmp -lgomp
// VARIANT: event
// VARIANT: no-sync
// OpenMP threads, each with its own non-blocking stream and its own buffer (one OpenMP thread per GPU stream, as
// many simulation codes do). Each thread writes its buffer, then the team meets at `#pragma omp barrier`, then each
// thread reads its right neighbour's buffer (a halo exchange) on its own stream. Without an argument each thread
// synchronizes its stream before the barrier (clean: the writer's thread learned its write done, and the barrier
// orders the neighbour's read launch after that). "event": each thread records an event after its write, and after
// the barrier the neighbour's stream waits on it (clean). "no-sync": neither (race: the barrier orders the host
// threads, not the GPU work: read-after-write between the neighbour's write_kernel and read_kernel). libgomp's
// barrier is futex-based, not a pthread call: the capture stands in front of libgomp's GOMP_barrier instead
// (docs/capture.md, host synchronization).
#include <omp.h>
#include <string>
#include "common.cuh"
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "sync";
    const int T = 4;
    float* bufs[T];
    float* outs[T];
    cudaStream_t streams[T];
    cudaEvent_t written[T];
    for (int t = 0; t < T; ++t) {
        CHECK(cudaMalloc(&bufs[t], N * sizeof(float)));
        CHECK(cudaMalloc(&outs[t], 256 * sizeof(float)));
        CHECK(cudaStreamCreateWithFlags(&streams[t], cudaStreamNonBlocking));
        CHECK(cudaEventCreateWithFlags(&written[t], cudaEventDisableTiming));
    }
#pragma omp parallel num_threads(T)
    {
        const int t = omp_get_thread_num();
        CHECK(cudaSetDevice(0));
        write_kernel<<<256, 256, 0, streams[t]>>>(bufs[t], N, 1.f + t);
        CHECK(cudaGetLastError());
        if (mode == "sync") CHECK(cudaStreamSynchronize(streams[t]));
        if (mode == "event") CHECK(cudaEventRecord(written[t], streams[t]));
#pragma omp barrier
        const int right = (t + 1) % T;
        if (mode == "event") CHECK(cudaStreamWaitEvent(streams[t], written[right], 0));
        read_kernel<<<256, 256, 0, streams[t]>>>(bufs[right], outs[t], N);
        CHECK(cudaGetLastError());
        CHECK(cudaStreamSynchronize(streams[t]));
    }
    CHECK(cudaDeviceSynchronize());
    if (mode == "sync")
        ground_truth("clean", "each OpenMP thread synchronizes its stream's write before the barrier; its neighbour reads after the barrier");
    else if (mode == "event")
        ground_truth("clean", "each OpenMP thread records an event after its write; its neighbour's stream waits on it after the barrier");
    else
        ground_truth("race", "write_kernel on one OpenMP thread's stream and read_kernel of the same buffer on its neighbour's stream, ordered only by the host barrier: read-after-write");
    return 0;
}
