// VARIANT: stream-sync
// A kernel fills a device buffer and cudaMemcpyAsync copies it to pinned host memory on the same stream; the host
// then reads the pinned buffer. Without an argument it reads right after the copy is issued (race: the capture
// guards the buffer's pages while the copy is in flight and sees the read fault); with "stream-sync" it reads
// after cudaStreamSynchronize (clean: the guard is lifted when the host learns the copy done).
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    bool synced = argc > 1 && std::strcmp(argv[1], "stream-sync") == 0;
    float *dev, *host;
    CHECK(cudaMalloc(&dev, N * sizeof(float)));
    CHECK(cudaMallocHost(&host, N * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, s>>>(dev, N, 3.f);
    CHECK(cudaMemcpyAsync(host, dev, N * sizeof(float), cudaMemcpyDeviceToHost, s));
    if (synced) CHECK(cudaStreamSynchronize(s));
    volatile float middle = host[N / 2];
    (void)middle;
    CHECK(cudaStreamSynchronize(s));
    if (synced) {
        std::printf("host[1] = %.1f\n", host[1]);
        ground_truth("clean", "the host reads the pinned buffer after cudaStreamSynchronize");
    } else {
        ground_truth("race", "cudaMemcpyAsync DtoH into pinned host and the host's read of it before anything waited: read-after-write");
    }
    return 0;
}
