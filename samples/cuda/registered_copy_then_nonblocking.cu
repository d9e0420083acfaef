// Host memory pinned by cudaHostRegister is pinned memory too: the plain copy from it returns when done.
#include <vector>
#include "common.cuh"
int main() {
    std::vector<float> host(N, 1.f);
    CHECK(cudaHostRegister(host.data(), N * sizeof(float), cudaHostRegisterDefault));
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t side;
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CHECK(cudaMemcpy(buf, host.data(), N * sizeof(float), cudaMemcpyHostToDevice));
    read_kernel<<<256, 256, 0, side>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaHostUnregister(host.data()));
    ground_truth("clean", "cudaMemcpy HtoD from registered (pinned) memory returns when done; read_kernel is launched after it");
    return 0;
}
