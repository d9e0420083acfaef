// A stream-ordered free on one stream while another stream still reads the block.
#include "common.cuh"
int main() {
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    float *buf, *out;
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    CHECK(cudaMallocAsync(&buf, N * sizeof(float), a));
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    cudaEvent_t written;
    CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    CHECK(cudaEventRecord(written, a));
    CHECK(cudaStreamWaitEvent(b, written, 0));
    read_kernel<<<256, 256, 0, b>>>(buf, out, N);
    CHECK(cudaFreeAsync(buf, a));  // stream a never waits for stream b's read
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "read_kernel on stream b and cudaFreeAsync on stream a: use-after-free");
    return 0;
}
