// The twin of d2h_copy_unsynchronized: the host synchronizes the non-blocking stream before copying back.
#include <vector>
#include "common.cuh"
int main() {
    std::vector<float> host(N);
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    cudaStream_t side;
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, side>>>(buf, N, 2.f);
    CHECK(cudaStreamSynchronize(side));
    CHECK(cudaMemcpy(host.data(), buf, N * sizeof(float), cudaMemcpyDeviceToHost));
    ground_truth("clean", "cudaStreamSynchronize(side) orders the DtoH copy after write_kernel");
    return 0;
}
