// VARIANT: event
// VARIANT: no-internal-deps
// VARIANT: use-before-alloc
// VARIANT: bounded-pool
// Stream-ordered allocation from the device's default memory pool, reused across streams. Without an argument:
// stream a allocates p1 (cudaMallocAsync), writes it with a long kernel and frees it (cudaFreeAsync); stream b then
// allocates p2 of the same size and writes it. The pool may hand p1's memory to b before a's free has run: its
// default policy cudaMemPoolReuseAllowInternalDependencies then makes b's allocation wait for a's free (the driver
// inserts the dependency), so the reuse is always ordered (clean by CUDA's rules, whether or not p2 == p1; the
// program prints which). "event": b waits on an event recorded after the free before it allocates (clean: reuse by
// cudaMemPoolReuseFollowEventDependencies). "no-internal-deps": the pool's opportunistic and internal-dependency
// reuse is switched off (clean: b gets other memory, or p1's only once the free is known done). "use-before-alloc":
// a allocates p1 and b writes it at once, before anything orders b after the allocation (race: DESIGN.md rule 8,
// the allocation writes the range at its place on a). "bounded-pool": as the default, from a pool of its own made
// with cudaMemPoolCreate whose maxSize is one block, so b's allocation can only be served by reusing p1 behind the
// internal dependency on a's pending free (clean; if the driver refuses the allocation instead, b does nothing).
#include <chrono>
#include <string>
#include "common.cuh"
__global__ void slow_write(float* data, int n, long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) data[i] = 1.f;
}
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "reuse";
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t freed;
    CHECK(cudaEventCreateWithFlags(&freed, cudaEventDisableTiming));
    int device = 0;
    CHECK(cudaGetDevice(&device));
    cudaMemPool_t pool;
    CHECK(cudaDeviceGetDefaultMemPool(&pool, device));
    if (mode == "no-internal-deps") {
        int off = 0;
        CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &off));
        CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowInternalDependencies, &off));
    }
    const size_t bytes = N * sizeof(float);
    if (mode == "bounded-pool") {
        cudaMemPoolProps props{};
        props.allocType = cudaMemAllocationTypePinned;
        props.handleTypes = cudaMemHandleTypeNone;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = device;
        props.maxSize = bytes;
        CHECK(cudaMemPoolCreate(&pool, &props));
    }
    float *p1, *p2;
    if (mode == "bounded-pool")
        CHECK(cudaMallocFromPoolAsync((void**)&p1, bytes, pool, a));
    else
        CHECK(cudaMallocAsync(&p1, bytes, a));
    if (mode == "use-before-alloc") {
        write_kernel<<<256, 256, 0, b>>>(p1, N, 2.f);  // b never waited for a's allocation
        CHECK(cudaGetLastError());
        CHECK(cudaDeviceSynchronize());
        CHECK(cudaFreeAsync(p1, a));
        CHECK(cudaDeviceSynchronize());
        ground_truth("race", "cudaMallocAsync on stream a and write_kernel on stream b into the block before b is ordered after the allocation");
        return 0;
    }
    slow_write<<<256, 256, 0, a>>>(p1, N, 20000000LL);  // ~10 ms: the free below is still pending when b allocates
    CHECK(cudaGetLastError());
    CHECK(cudaFreeAsync(p1, a));
    if (mode == "event") {
        CHECK(cudaEventRecord(freed, a));
        CHECK(cudaStreamWaitEvent(b, freed, 0));
    }
    cudaError_t got = mode == "bounded-pool" ? cudaMallocFromPoolAsync((void**)&p2, bytes, pool, b) : cudaMallocAsync(&p2, bytes, b);
    if (got == cudaSuccess) {
        write_kernel<<<256, 256, 0, b>>>(p2, N, 3.f);
        CHECK(cudaGetLastError());
        CHECK(cudaFreeAsync(p2, b));
    } else {
        std::printf("b's allocation failed: %s\n", cudaGetErrorString(got));
        (void)cudaGetLastError();
        p2 = nullptr;
    }
    CHECK(cudaDeviceSynchronize());
    std::printf("p2 %s p1\n", p2 == p1 ? "==" : "!=");
    const char* what = mode == "reuse" || mode == "bounded-pool" ? "b's allocation reuses a's freed block only behind the dependency the pool inserts on a's free"
                       : mode == "event" ? "b waits on an event recorded after a's free, then allocates"
                                         : "reuse across streams switched off: b gets its block only when a's free is done";
    ground_truth("clean", what);
    return 0;
}
