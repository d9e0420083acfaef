// A 2D copy (cudaMemcpy2DAsync) on one non-blocking stream reads a pitched buffer a kernel on another
// non-blocking stream is still writing.
#include <vector>
#include "common.cuh"
int main() {
    const size_t width = 1000 * sizeof(float), rows = 1024;
    float* pitched;
    size_t pitch;
    CHECK(cudaMallocPitch(&pitched, &pitch, width, rows));
    float* host;
    CHECK(cudaMallocHost(&host, width * rows));
    cudaStream_t compute, copy;
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, compute>>>(pitched, int(pitch / sizeof(float) * rows), 2.f);
    CHECK(cudaMemcpy2DAsync(host, width, pitched, pitch, width, rows, cudaMemcpyDeviceToHost, copy));  // no wait
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFreeHost(host));
    ground_truth("race", "write_kernel on the compute stream and cudaMemcpy2DAsync DtoH on the copy stream: read-after-write on the pitched buffer");
    return 0;
}
