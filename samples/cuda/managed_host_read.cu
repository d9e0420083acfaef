// VARIANT: device-sync
// VARIANT: event-sync
// VARIANT: query-loop
// A kernel on a non-blocking stream writes managed memory, then the host reads it. Without an argument the host
// reads right after the launch (race: the read, which the driver serves by migrating the page and CUPTI reports
// as a CPU page fault, is unordered with the kernel's write); with "device-sync" it reads after
// cudaDeviceSynchronize, with "event-sync" after cudaEventSynchronize of an event recorded after the kernel, with
// "query-loop" after cudaStreamQuery returned cudaSuccess (clean: the page still faults, the GPU had it, and the
// read is ordered after the kernel).
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "none";
    int device = 0, concurrent = 0;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device));
    if (!concurrent) {
        // Without concurrent managed access the host may not touch managed memory while a kernel runs at all.
        std::printf("this device has no concurrent managed access: nothing to show\n");
        return 0;
    }
    float* out;
    CHECK(cudaMallocManaged(&out, N * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    write_kernel<<<256, 256, 0, s>>>(out, N, 2.f);
    CHECK(cudaGetLastError());
    if (std::strcmp(mode, "device-sync") == 0) {
        CHECK(cudaDeviceSynchronize());
    } else if (std::strcmp(mode, "event-sync") == 0) {
        CHECK(cudaEventRecord(done, s));
        CHECK(cudaEventSynchronize(done));
    } else if (std::strcmp(mode, "query-loop") == 0) {
        cudaError_t status;
        while ((status = cudaStreamQuery(s)) == cudaErrorNotReady) {
        }
        CHECK(status);
    }
    volatile float first = out[N / 2];
    (void)first;
    CHECK(cudaDeviceSynchronize());
    if (std::strcmp(mode, "none") == 0)
        ground_truth("race", "write_kernel on a non-blocking stream and the host's read of managed out right after the launch: read-after-write");
    else
        ground_truth("clean", "the host reads managed out after the host learned the kernel done");
    return 0;
}
