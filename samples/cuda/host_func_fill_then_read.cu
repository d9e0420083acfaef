// VARIANT: no-wait
// VARIANT: copy-no-wait
// VARIANT: late-no-wait
// A host function (cudaLaunchHostFunc) on non-blocking stream a fills a pinned host buffer, and work on non-blocking
// stream b reads it (DESIGN.md rules 12 and 13: the function's stores are host accesses at its place on a). Without
// an argument a long kernel runs first on a, then the host function, then an event; b waits on that event and runs
// read_kernel on the pinned buffer through its mapped pointer (clean). "no-wait": b does not wait (race:
// read-after-write between the host function's stores and the kernel's loads). "copy-no-wait": b copies the buffer
// to the device (cudaMemcpyAsync HtoD) instead, without waiting (race: the copy reads what the host function
// writes). "late-no-wait": no long kernel, so the host function runs at once; the main thread sleeps 200 ms (so the
// function is long done) and then launches b's read_kernel without any wait (race by CUDA's rules all the same:
// nothing orders b's read after the host function, only timing; DESIGN.md: a race must be reported whatever the
// timing of the run was).
#include <chrono>
#include <string>
#include <thread>
#include "common.cuh"
struct Fill {
    float* data;
    int n;
};
static void CUDART_CB fill_on_host(void* arg) {
    Fill* fill = static_cast<Fill*>(arg);
    for (int i = 0; i < fill->n; ++i) fill->data[i] = 0.25f * i;
}
__global__ void spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "event";
    float *host, *dev, *out;
    CHECK(cudaMallocHost(&host, N * sizeof(float)));
    CHECK(cudaMalloc(&dev, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t filled;
    CHECK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
    Fill fill{host, N};
    if (mode != "late-no-wait") {
        spin<<<1, 1, 0, a>>>(200000000LL);  // ~100 ms: b's read is issued before the host function runs
        CHECK(cudaGetLastError());
    }
    CHECK(cudaLaunchHostFunc(a, fill_on_host, &fill));
    if (mode == "event") {
        CHECK(cudaEventRecord(filled, a));
        CHECK(cudaStreamWaitEvent(b, filled, 0));
    }
    if (mode == "late-no-wait") std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (mode == "copy-no-wait") {
        CHECK(cudaMemcpyAsync(dev, host, N * sizeof(float), cudaMemcpyHostToDevice, b));
    } else {
        read_kernel<<<256, 256, 0, b>>>(host, out, N);
        CHECK(cudaGetLastError());
    }
    CHECK(cudaDeviceSynchronize());
    if (mode == "event")
        ground_truth("clean", "stream b waits on an event recorded after the host function on a that fills the pinned buffer, then reads it");
    else if (mode == "no-wait")
        ground_truth("race", "a host function on stream a fills the pinned buffer read_kernel on stream b reads, nothing orders them: read-after-write");
    else if (mode == "copy-no-wait")
        ground_truth("race", "a host function on stream a fills the pinned buffer cudaMemcpyAsync HtoD on stream b reads, nothing orders them: read-after-write");
    else
        ground_truth("race", "a host function on stream a fills the pinned buffer and read_kernel on stream b reads it 200 ms later, ordered only by timing: read-after-write");
    return 0;
}
