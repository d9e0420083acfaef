// The host watch's cost on a loop that refills a pinned staging buffer every iteration and uploads it
// (benches/gpu_host_watch.sh; figures in docs/performance.md). "synced": each refill waits for the last upload's
// event (clean; the guard is armed at each upload and lifted at each event synchronization: two mprotect calls
// an iteration, no fault). "early": the refill starts while the upload may still be queued and waits only
// before the next upload (a race; one guard fault an iteration). Prints the time per iteration.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <cuda_runtime.h>

#define CHECK(call)                                                                              \
    do {                                                                                         \
        cudaError_t err_ = (call);                                                               \
        if (err_ != cudaSuccess) {                                                               \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));   \
            std::exit(1);                                                                        \
        }                                                                                        \
    } while (0)

static double now_s() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
    bool early = argc > 1 && std::strcmp(argv[1], "early") == 0;
    int iterations = argc > 2 ? std::atoi(argv[2]) : 20000;
    size_t bytes = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : (256u << 10);
    size_t n = bytes / sizeof(float);
    float *staging, *dev;
    CHECK(cudaMallocHost(&staging, bytes));
    CHECK(cudaMalloc(&dev, bytes));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t uploaded;
    CHECK(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming));
    CHECK(cudaEventRecord(uploaded, s));
    double start = now_s();
    for (int it = 0; it < iterations; ++it) {
        if (!early) CHECK(cudaEventSynchronize(uploaded));
        // The refill touches every page of the buffer.
        for (size_t i = 0; i < n; i += 1024) staging[i] = float(it + i);
        if (early) CHECK(cudaEventSynchronize(uploaded));
        CHECK(cudaMemcpyAsync(dev, staging, bytes, cudaMemcpyHostToDevice, s));
        CHECK(cudaEventRecord(uploaded, s));
    }
    CHECK(cudaStreamSynchronize(s));
    double elapsed = now_s() - start;
    std::printf("LOOP mode=%s iterations=%d bytes=%zu us_per_iteration=%.3f\n", early ? "early" : "synced", iterations, bytes,
                elapsed * 1e6 / iterations);
    return 0;
}
