// The race-free twin of device_sync_other_gpu.cu: after synchronizing GPU 1, the host also synchronizes GPU 0,
// whose stream ran the kernel.
#include "../cuda/common.cuh"
int main() {
    float *buf, *out;
    cudaStream_t a, b;
    CHECK(cudaSetDevice(0));
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    CHECK(cudaSetDevice(1));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaSetDevice(0));
    CHECK(cudaDeviceSynchronize());  // GPU 0: the kernel is done
    read_kernel<<<256, 256, 0, b>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    ground_truth("clean", "cudaDeviceSynchronize on GPU 0 orders the read after the write");
    return 0;
}
