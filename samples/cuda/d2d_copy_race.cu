// A device-to-device copy on a side stream overwrites a buffer a kernel on another stream is reading.
#include "common.cuh"
int main() {
    float *buf, *src, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&src, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    CHECK(cudaMemset(buf, 0, N * sizeof(float)));
    CHECK(cudaMemset(src, 0, N * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t compute, side;
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    read_kernel<<<256, 256, 0, compute>>>(buf, out, N);
    CHECK(cudaMemcpyAsync(buf, src, N * sizeof(float), cudaMemcpyDeviceToDevice, side));  // no wait for compute
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "read_kernel on the compute stream and the DtoD copy on the side stream: write-after-read on buf");
    return 0;
}
