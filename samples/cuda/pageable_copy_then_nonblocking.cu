// A plain cudaMemcpy from pageable host memory returns once the data is staged: the DMA into the device buffer
// finishes later on the legacy default stream, which a non-blocking stream does not wait for.
#include <vector>
#include "common.cuh"
int main() {
    std::vector<float> host(N, 1.f);  // pageable: plain heap memory
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t side;
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CHECK(cudaMemcpy(buf, host.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    read_kernel<<<256, 256, 0, side>>>(buf, out, N);  // nothing orders it after the copy's DMA
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "cudaMemcpy HtoD from pageable memory (legacy default stream) and read_kernel on a non-blocking stream: read-after-write on buf");
    return 0;
}
