// VARIANT: no-sync
// VARIANT: registered
// VARIANT: registered-no-sync
// Zero-copy: a kernel on a non-blocking stream writes mapped pinned host memory directly (cudaHostAlloc with
// cudaHostAllocMapped and the pointer cudaHostGetDevicePointer gives; with "registered" / "registered-no-sync"
// malloc'ed memory registered with cudaHostRegisterMapped), then the host reads it. Without "no-sync" the host
// reads after cudaStreamSynchronize (clean); with it the host reads right after the launch (race: the kernel's
// stores and the host's load of the same bytes: read-after-write).
#include <cstdlib>
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    bool registered = std::strncmp(mode, "registered", 10) == 0;
    bool synced = std::strstr(mode, "no-sync") == nullptr;
    float* host;
    if (registered) {
        host = static_cast<float*>(std::aligned_alloc(4096, N * sizeof(float)));
        std::memset(host, 0, N * sizeof(float));
        CHECK(cudaHostRegister(host, N * sizeof(float), cudaHostRegisterMapped));
    } else {
        CHECK(cudaHostAlloc(&host, N * sizeof(float), cudaHostAllocMapped));
    }
    float* dev;
    CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, s>>>(dev, N, 3.f);
    CHECK(cudaGetLastError());
    if (synced) CHECK(cudaStreamSynchronize(s));
    volatile float middle = host[N / 2];
    (void)middle;
    CHECK(cudaStreamSynchronize(s));
    std::printf("device pointer %s the host pointer\n", dev == host ? "is" : "is not");
    if (synced)
        ground_truth("clean", "the host reads the mapped buffer after cudaStreamSynchronize of the writing kernel's stream");
    else
        ground_truth("race", "write_kernel writes the mapped host buffer and the host reads it right after the launch: read-after-write");
    return 0;
}
