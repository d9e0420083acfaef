// VARIANT: other-stream
// A kernel on stream a reads a mapped pinned buffer straight from the device; a callback added with the older
// cudaStreamAddCallback then refills that buffer on the host. Added to stream a itself the callback starts only
// once the kernel is done (clean, DESIGN.md rule 13); with "other-stream" it is added to stream b, which nothing
// orders against a (race: the kernel's loads and the callback's stores of the same bytes: write-after-read).
#include <cstring>
#include "common.cuh"

struct Refill {
    float* data;
    int n;
};

static void CUDART_CB refill(cudaStream_t, cudaError_t status, void* arg) {
    if (status != cudaSuccess) return;
    Refill* r = static_cast<Refill*>(arg);
    for (int i = 0; i < r->n; ++i) r->data[i] = 2.f * i;
}

int main(int argc, char** argv) {
    bool same_stream = !(argc > 1 && std::strcmp(argv[1], "other-stream") == 0);
    float *host, *out;
    CHECK(cudaHostAlloc(&host, N * sizeof(float), cudaHostAllocMapped));
    for (int i = 0; i < N; ++i) host[i] = 1.f;
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    read_kernel<<<256, 256, 0, a>>>(host, out, N);
    CHECK(cudaGetLastError());
    Refill r{host, N};
    CHECK(cudaStreamAddCallback(same_stream ? a : b, refill, &r, 0));
    CHECK(cudaDeviceSynchronize());
    if (same_stream)
        ground_truth("clean", "the callback refilling the buffer is on the reading kernel's stream: it runs after the kernel");
    else
        ground_truth("race", "read_kernel on stream a reads the mapped buffer that a callback on stream b refills: write-after-read");
    return 0;
}
