// The host waits for an event, then launches on another stream: ordered.
#include "common.cuh"
int main() {
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t written;
    CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    CHECK(cudaEventRecord(written, a));
    CHECK(cudaEventSynchronize(written));
    read_kernel<<<256, 256, 0, b>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    ground_truth("clean", "cudaEventSynchronize before the launch on stream b");
    return 0;
}
