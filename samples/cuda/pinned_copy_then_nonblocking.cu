// The twin of pageable_copy_then_nonblocking: from pinned host memory a plain cudaMemcpy returns only once the
// copy is done, so the kernel the host launches afterwards is ordered after it.
#include "common.cuh"
int main() {
    float *host, *buf, *out;
    CHECK(cudaMallocHost(&host, N * sizeof(float)));
    for (int i = 0; i < N; ++i) host[i] = 1.f;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t side;
    CHECK(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
    CHECK(cudaMemcpy(buf, host, N * sizeof(float), cudaMemcpyHostToDevice));
    read_kernel<<<256, 256, 0, side>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFreeHost(host));
    ground_truth("clean", "cudaMemcpy HtoD from pinned memory returns when done; read_kernel is launched after it");
    return 0;
}
