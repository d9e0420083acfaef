// Two GPUs: a kernel on GPU 0 writes a buffer while GPU 1's stream copies it to its own memory (a peer copy),
// with nothing ordering the two.
#include "../cuda/common.cuh"
int main() {
    float *src, *dst;
    cudaStream_t a, b;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&src, N * sizeof(float)));
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaSetDevice(1));
    CHECK(cudaMalloc(&dst, N * sizeof(float)));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaSetDevice(0));
    write_kernel<<<256, 256, 0, a>>>(src, N, 1.f);
    CHECK(cudaSetDevice(1));
    CHECK(cudaMemcpyPeerAsync(dst, 1, src, 0, N * sizeof(float), b));  // may read src before the kernel is done
    CHECK(cudaStreamSynchronize(b));
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "write_kernel (GPU 0, stream a) || peer copy from its buffer (GPU 1, stream b): read-after-write");
    return 0;
}
