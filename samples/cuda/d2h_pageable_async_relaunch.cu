// VARIANT: default-kind
// VARIANT: pinned
// A kernel on non-blocking stream a fills dev; cudaMemcpyAsync copies dev to pageable host memory on a, which
// returns only once the copy is done (DESIGN.md rule 6: the host joins it); the host reads the copy and launches
// a kernel that overwrites dev on another non-blocking stream b (clean). "default-kind" does the same with
// cudaMemcpyDefault (the direction inferred from the pointers: still device to pageable host, clean). With
// "pinned" the copy goes to pinned host memory, asynchronous for the host, and nothing waits for it (races: b's
// overwrite of dev against a's write of it, write-after-write, and against the copy's read of it,
// write-after-read; and the host's read of the pinned copy, read-after-write).
#include <cstring>
#include <vector>
#include "common.cuh"
int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    bool pinned = std::strcmp(mode, "pinned") == 0;
    cudaMemcpyKind kind = std::strcmp(mode, "default-kind") == 0 ? cudaMemcpyDefault : cudaMemcpyDeviceToHost;
    std::vector<float> pageable(pinned ? 0 : N);
    float* host = pageable.data();
    if (pinned) CHECK(cudaMallocHost(&host, N * sizeof(float)));
    float* dev;
    CHECK(cudaMalloc(&dev, N * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, a>>>(dev, N, 1.f);
    CHECK(cudaMemcpyAsync(host, dev, N * sizeof(float), kind, a));
    volatile float middle = host[N / 2];
    (void)middle;
    write_kernel<<<256, 256, 0, b>>>(dev, N, 2.f);
    CHECK(cudaDeviceSynchronize());
    if (pinned)
        ground_truth("race", "cudaMemcpyAsync DtoH into pinned memory does not make the host wait: b's write_kernel overwrites dev that a's write_kernel writes (write-after-write) and the copy may still read (write-after-read), and the host reads the copy early (read-after-write)");
    else
        ground_truth("clean", "cudaMemcpyAsync from the device to pageable host memory returns when the copy is done: the host's read and b's relaunch come after it");
    return 0;
}
