// A plain cudaMemcpy to the host runs on the legacy default stream; a non-blocking stream's kernel still
// writing the source is not waited for.
#include <vector>
#include "common.cuh"
int main() {
    std::vector<float> host(N);
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    cudaStream_t side;
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, side>>>(buf, N, 2.f);
    CHECK(cudaMemcpy(host.data(), buf, N * sizeof(float), cudaMemcpyDeviceToHost));  // no wait for side
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "write_kernel on a non-blocking stream and cudaMemcpy DtoH (legacy default stream): read-after-write on buf");
    return 0;
}
