// VARIANT: no-wait
// A __device__ array (a module global, not a cudaMalloc allocation) is filled with cudaMemcpyToSymbolAsync on
// non-blocking stream a and read back with cudaMemcpyFromSymbolAsync on non-blocking stream b into pinned host
// memory. Without an argument b waits on an event recorded after the fill (clean); with "no-wait" nothing orders
// the two copies (race: the HtoD copy writes the symbol's bytes the DtoH copy reads, read-after-write).
#include <cstring>
#include "common.cuh"
constexpr int M = 1 << 18;
__device__ float table[M];
int main(int argc, char** argv) {
    bool wait = !(argc > 1 && std::strcmp(argv[1], "no-wait") == 0);
    float *src, *dst;
    CHECK(cudaMallocHost(&src, M * sizeof(float)));
    CHECK(cudaMallocHost(&dst, M * sizeof(float)));
    for (int i = 0; i < M; ++i) src[i] = float(i);
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t filled;
    CHECK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
    CHECK(cudaMemcpyToSymbolAsync(table, src, M * sizeof(float), 0, cudaMemcpyHostToDevice, a));
    if (wait) {
        CHECK(cudaEventRecord(filled, a));
        CHECK(cudaStreamWaitEvent(b, filled, 0));
    }
    CHECK(cudaMemcpyFromSymbolAsync(dst, table, M * sizeof(float), 0, cudaMemcpyDeviceToHost, b));
    CHECK(cudaDeviceSynchronize());
    std::printf("dst[7] = %.0f\n", dst[7]);
    if (wait)
        ground_truth("clean", "stream b waits on an event recorded after the copy to the symbol before copying it back");
    else
        ground_truth("race", "cudaMemcpyToSymbolAsync on a and cudaMemcpyFromSymbolAsync on b of the same __device__ array, unordered: read-after-write");
    return 0;
}
