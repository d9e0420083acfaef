// LINK: -lcuda
// VARIANT: no-wait
// Stream memory operations as a cross-stream signal (the driver API's cuStreamWriteValue32 / cuStreamWaitValue32,
// as NCCL-like code uses them): stream a runs write_kernel, then writes 1 to a flag; stream b waits until the
// flag is at least 1, then runs read_kernel on the buffer. The flag write is ordered after a's kernel and b's
// read after the wait (clean). With "no-wait" b does not wait on the flag (race: read-after-write).
#include <cuda.h>
#include <cstring>
#include "common.cuh"
#define CU_CHECK(call)                                                                   \
    do {                                                                                 \
        CUresult r_ = (call);                                                            \
        if (r_ != CUDA_SUCCESS) {                                                        \
            std::fprintf(stderr, "%s:%d: driver error %d\n", __FILE__, __LINE__, int(r_)); \
            std::exit(1);                                                                \
        }                                                                                \
    } while (0)
int main(int argc, char** argv) {
    bool wait = !(argc > 1 && std::strcmp(argv[1], "no-wait") == 0);
    float *buf, *out;
    unsigned* flag;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    CHECK(cudaMalloc(&flag, sizeof(unsigned)));
    CHECK(cudaMemset(flag, 0, sizeof(unsigned)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    CU_CHECK(cuStreamWriteValue32(a, (CUdeviceptr)flag, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    if (wait) CU_CHECK(cuStreamWaitValue32(b, (CUdeviceptr)flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    read_kernel<<<256, 256, 0, b>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    if (wait)
        ground_truth("clean", "stream b waits (cuStreamWaitValue32) for the flag stream a writes (cuStreamWriteValue32) after its write_kernel");
    else
        ground_truth("race", "write_kernel on a and read_kernel on b, unordered (b does not wait on the flag): read-after-write");
    return 0;
}
