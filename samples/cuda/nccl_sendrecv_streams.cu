// VARIANT: no-wait-before
// VARIANT: no-wait-after
// LINK: NCCL
// NCCL on its own stream, a rank sending to itself (one GPU): a kernel on the compute stream fills `send`,
// ncclSend/ncclRecv in one group move it into `recv` on the communication stream, and a kernel on the compute
// stream reads `recv`. Events order the streams both ways. The NCCL kernel's one argument names neither buffer:
// only NCCL's API says that it reads `send` and writes `recv`.
//   (no argument)   clean: the communication stream waits for the fill, the compute stream for the transfer
//   no-wait-before  race: the NCCL kernel reads `send` while the fill may still write it
//   no-wait-after   race: the read kernel reads `recv` while the NCCL kernel may still write it
#include <cstring>
#include <nccl.h>
#include "common.cuh"

#define NCCL_CHECK(call)                                                                          \
    do {                                                                                          \
        ncclResult_t r_ = (call);                                                                 \
        if (r_ != ncclSuccess) {                                                                  \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, ncclGetErrorString(r_));      \
            std::exit(1);                                                                         \
        }                                                                                         \
    } while (0)

int main(int argc, char** argv) {
    const char* variant = argc > 1 ? argv[1] : "";
    bool wait_before = std::strcmp(variant, "no-wait-before") != 0;
    bool wait_after = std::strcmp(variant, "no-wait-after") != 0;
    int device = 0;
    ncclComm_t comm;
    NCCL_CHECK(ncclCommInitAll(&comm, 1, &device));
    float *send, *recv, *out;
    CHECK(cudaMalloc(&send, N * sizeof(float)));
    CHECK(cudaMalloc(&recv, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t compute, comm_stream;
    CHECK(cudaStreamCreateWithFlags(&compute, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&comm_stream, cudaStreamNonBlocking));
    cudaEvent_t filled, moved;
    CHECK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&moved, cudaEventDisableTiming));

    write_kernel<<<256, 256, 0, compute>>>(send, N, 2.0f);
    CHECK(cudaEventRecord(filled, compute));
    if (wait_before) CHECK(cudaStreamWaitEvent(comm_stream, filled, 0));
    NCCL_CHECK(ncclGroupStart());
    NCCL_CHECK(ncclSend(send, N, ncclFloat, 0, comm, comm_stream));
    NCCL_CHECK(ncclRecv(recv, N, ncclFloat, 0, comm, comm_stream));
    NCCL_CHECK(ncclGroupEnd());
    CHECK(cudaEventRecord(moved, comm_stream));
    if (wait_after) CHECK(cudaStreamWaitEvent(compute, moved, 0));
    read_kernel<<<256, 256, 0, compute>>>(recv, out, N);
    CHECK(cudaDeviceSynchronize());

    if (!wait_before) {
        ground_truth("race", "write_kernel (compute stream) writes send || the NCCL send (communication stream) reads it");
    } else if (!wait_after) {
        ground_truth("race", "the NCCL receive (communication stream) writes recv || read_kernel (compute stream) reads it");
    } else {
        ground_truth("clean", "events order the fill, the transfer and the read");
    }
    NCCL_CHECK(ncclCommDestroy(comm));
    return 0;
}
