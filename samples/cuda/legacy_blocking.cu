// The legacy default stream against blocking streams: ordered both ways (DESIGN.md rule 7).
#include "common.cuh"
int main() {
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreate(&s));  // blocking
    write_kernel<<<256, 256, 0, s>>>(buf, N, 1.f);
    read_kernel<<<256, 256>>>(buf, out, N);          // legacy default stream: waits for s
    write_kernel<<<256, 256, 0, s>>>(buf, N, 2.f);   // waits for the legacy default stream
    CHECK(cudaDeviceSynchronize());
    ground_truth("clean", "the legacy default stream orders blocking stream work both ways");
    return 0;
}
