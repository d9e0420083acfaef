// The race-free twin of peer_copy_race.cu: GPU 1's stream waits on an event GPU 0's stream recorded after the
// kernel (an event wait may cross devices).
#include "../cuda/common.cuh"
int main() {
    float *src, *dst;
    cudaStream_t a, b;
    cudaEvent_t written;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&src, N * sizeof(float)));
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&dst, N * sizeof(float)));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaSetDevice(0));
    write_kernel<<<256, 256, 0, a>>>(src, N, 1.f);
    CHECK(cudaEventRecord(written, a));
    CHECK(cudaSetDevice(1));
    CHECK(cudaStreamWaitEvent(b, written, 0));
    CHECK(cudaMemcpyPeerAsync(dst, 1, src, 0, N * sizeof(float), b));
    CHECK(cudaStreamSynchronize(b));
    ground_truth("clean", "GPU 1's stream waits on an event recorded on GPU 0 after the kernel, then copies");
    return 0;
}
