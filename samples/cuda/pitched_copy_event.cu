// The twin of pitched_copy_race: the copy stream waits on an event recorded after the kernel; and a 2D memset on
// a third stream is ordered after the copy by a second event.
#include "common.cuh"
int main() {
    const size_t width = 1000 * sizeof(float), rows = 1024;
    float* pitched;
    size_t pitch;
    CHECK(cudaMallocPitch(&pitched, &pitch, width, rows));
    float* host;
    CHECK(cudaMallocHost(&host, width * rows));
    cudaStream_t compute, copy, clear;
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&copy, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&clear, cudaStreamNonBlocking));
    cudaEvent_t written, copied;
    CHECK(cudaEventCreate(&written));
    CHECK(cudaEventCreate(&copied));
    write_kernel<<<256, 256, 0, compute>>>(pitched, int(pitch / sizeof(float) * rows), 2.f);
    CHECK(cudaEventRecord(written, compute));
    CHECK(cudaStreamWaitEvent(copy, written, 0));
    CHECK(cudaMemcpy2DAsync(host, width, pitched, pitch, width, rows, cudaMemcpyDeviceToHost, copy));
    CHECK(cudaEventRecord(copied, copy));
    CHECK(cudaStreamWaitEvent(clear, copied, 0));
    CHECK(cudaMemset2DAsync(pitched, pitch, 0, width, rows, clear));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFreeHost(host));
    ground_truth("clean", "events order write_kernel -> cudaMemcpy2DAsync -> cudaMemset2DAsync on three streams");
    return 0;
}
