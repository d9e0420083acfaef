// VARIANT: no-wait
// A kernel on non-blocking stream w writes the input; two library reductions read it, each on its own non-blocking
// stream: cub::DeviceReduce::Sum (with its temporary storage sized and allocated up front) on s1, and
// thrust::reduce with thrust::cuda::par.on(s2) on s2. Both take the input as a const float*. Without an argument
// s1 and s2 wait on an event recorded after the write (clean: the two reductions only read the input, and each
// writes only its own temporary storage and result); with "no-wait" nothing orders them after the write (race:
// the write and each library kernel that reads the input, read-after-write).
#include <cub/device/device_reduce.cuh>
#include <thrust/reduce.h>
#include <thrust/system/cuda/execution_policy.h>
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    bool wait = !(argc > 1 && std::strcmp(argv[1], "no-wait") == 0);
    float *in, *cub_out;
    CHECK(cudaMalloc(&in, N * sizeof(float)));
    CHECK(cudaMalloc(&cub_out, sizeof(float)));
    const float* input = in;
    cudaStream_t w, s1, s2;
    CHECK(cudaStreamCreateWithFlags(&w, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    cudaEvent_t written;
    CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    size_t temp_bytes = 0;
    CHECK(cub::DeviceReduce::Sum(nullptr, temp_bytes, input, cub_out, N, s1));
    void* temp;
    CHECK(cudaMalloc(&temp, temp_bytes));
    CHECK(cudaDeviceSynchronize());
    write_kernel<<<256, 256, 0, w>>>(in, N, 1.f);
    CHECK(cudaGetLastError());
    if (wait) {
        CHECK(cudaEventRecord(written, w));
        CHECK(cudaStreamWaitEvent(s1, written, 0));
        CHECK(cudaStreamWaitEvent(s2, written, 0));
    }
    CHECK(cub::DeviceReduce::Sum(temp, temp_bytes, input, cub_out, N, s1));
    float total = thrust::reduce(thrust::cuda::par.on(s2), input, input + N, 0.f);
    CHECK(cudaDeviceSynchronize());
    float cub_total = 0;
    CHECK(cudaMemcpy(&cub_total, cub_out, sizeof(float), cudaMemcpyDeviceToHost));
    if (wait) {
        std::printf("cub %.6g thrust %.6g\n", cub_total, total);
        ground_truth("clean", "s1 (cub::DeviceReduce::Sum) and s2 (thrust::reduce) wait on an event recorded after the write of the input they both only read");
    } else {
        ground_truth("race", "write_kernel on w and the reduction kernels of cub on s1 and thrust on s2 that read its output, unordered: read-after-write");
    }
    return 0;
}
