// A plain cudaMemset on device memory is asynchronous with respect to the host: it runs on the legacy default
// stream, which a non-blocking stream does not wait for.
#include "common.cuh"
int main() {
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    cudaStream_t side;
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CHECK(cudaMemset(buf, 0, N * sizeof(float)));
    write_kernel<<<256, 256, 0, side>>>(buf, N, 2.f);  // may run before or during the memset
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "cudaMemset (legacy default stream) and write_kernel on a non-blocking stream: write-after-write on buf");
    return 0;
}
