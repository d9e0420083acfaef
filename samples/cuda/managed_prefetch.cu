// VARIANT: no-sync
// VARIANT: prefetch-other-stream
// Managed memory with cudaMemPrefetchAsync, as code that stages results for the host does. Without an argument a
// kernel on non-blocking stream s writes managed buf, cudaMemPrefetchAsync moves it to the host on s, the host
// synchronizes s and reads (clean). "no-sync": the host reads right after issuing the prefetch (race:
// read-after-write with the kernel; a prefetch orders nothing for the host). "prefetch-other-stream": the kernel
// writes buf on stream a while a prefetch of buf to the device is issued on stream b with nothing ordering them,
// then the host synchronizes the device and reads (clean: a prefetch moves pages and keeps their contents, it is
// not an access of the data; the kernel's write and the host's read are ordered by cudaDeviceSynchronize).
#include <string>
#include "common.cuh"
static void prefetch(float* p, size_t bytes, bool to_host, int device, cudaStream_t s) {
#if CUDART_VERSION >= 13000
    cudaMemLocation loc{};
    loc.type = to_host ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice;
    loc.id = to_host ? 0 : device;
    CHECK(cudaMemPrefetchAsync(p, bytes, loc, 0, s));
#else
    CHECK(cudaMemPrefetchAsync(p, bytes, to_host ? cudaCpuDeviceId : device, s));
#endif
}
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "sync";
    int device = 0, concurrent = 0;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device));
    if (!concurrent) {
        std::printf("this device has no concurrent managed access: nothing to show\n");
        return 0;
    }
    const size_t bytes = N * sizeof(float);
    float* buf;
    CHECK(cudaMallocManaged(&buf, bytes));
    cudaStream_t s, other;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, s>>>(buf, N, 2.f);
    CHECK(cudaGetLastError());
    if (mode == "prefetch-other-stream") {
        prefetch(buf, bytes, false, device, other);
        CHECK(cudaDeviceSynchronize());
    } else {
        prefetch(buf, bytes, true, device, s);
        if (mode == "sync") CHECK(cudaStreamSynchronize(s));
    }
    volatile float seen = buf[N / 2];
    (void)seen;
    CHECK(cudaDeviceSynchronize());
    if (mode == "sync")
        ground_truth("clean", "the host reads managed buf after synchronizing the stream that wrote and prefetched it");
    else if (mode == "no-sync")
        ground_truth("race", "write_kernel on stream s and the host's read of managed buf right after the prefetch was issued: read-after-write");
    else
        ground_truth("clean", "a prefetch on stream b unordered with a's kernel moves pages, it is no access; the host reads after cudaDeviceSynchronize");
    CHECK(cudaFree(buf));
    return 0;
}
