// The legacy default stream against a non-blocking stream: not ordered.
#include "common.cuh"
int main() {
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, s>>>(buf, N, 1.f);
    read_kernel<<<256, 256>>>(buf, out, N);  // legacy default stream does not wait for a non-blocking stream
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "write_kernel on a non-blocking stream, read_kernel on the legacy default stream: read-after-write on buf");
    return 0;
}
