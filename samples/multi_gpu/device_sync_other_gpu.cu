// cudaDeviceSynchronize waits for the current device only: after a kernel on GPU 0, the host synchronizes GPU 1
// and then reads the buffer on another stream of GPU 0.
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
    CHECK(cudaDeviceSynchronize());  // GPU 1 only: the kernel on GPU 0 may still run
    CHECK(cudaSetDevice(0));
    read_kernel<<<256, 256, 0, b>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "write_kernel (GPU 0, stream a) || read_kernel (GPU 0, stream b): the device synchronization was GPU 1's");
    return 0;
}
