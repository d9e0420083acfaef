// LINK: -rdc=true
// VARIANT: no-wait
// VARIANT: launch-ex
// A cooperative kernel (cudaLaunchCooperativeKernel, one block per multiprocessor) writes tmp, meets at a grid-wide
// barrier (cooperative_groups::this_grid().sync()), then writes out from its neighbours' tmp, on non-blocking stream
// a; read_kernel then reads out on non-blocking stream b. Without an argument b waits on an event recorded after
// the cooperative launch (clean); "no-wait" does not (race: read-after-write on out); "launch-ex" launches the same
// kernel through cudaLaunchKernelEx with the cudaLaunchAttributeCooperative attribute, and b waits (clean).
#include <cooperative_groups.h>
#include <string>
#include "common.cuh"
namespace cg = cooperative_groups;
__global__ void smooth(float* tmp, float* out, int n) {
    cg::grid_group grid = cg::this_grid();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) tmp[i] = 0.5f * i;
    grid.sync();
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        out[i] = tmp[i] + tmp[(i + 1) % n];
}
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "coop";
    int device = 0, coop = 0, sms = 0;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaDeviceGetAttribute(&coop, cudaDevAttrCooperativeLaunch, device));
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
    if (!coop) {
        std::printf("no cooperative launch on this device: nothing to show\n");
        return 0;
    }
    float *tmp, *out, *sums;
    CHECK(cudaMalloc(&tmp, N * sizeof(float)));
    CHECK(cudaMalloc(&out, N * sizeof(float)));
    CHECK(cudaMalloc(&sums, 256 * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    int n = N;
    if (mode == "launch-ex") {
        cudaLaunchConfig_t config{};
        config.gridDim = dim3(sms);
        config.blockDim = dim3(256);
        config.stream = a;
        cudaLaunchAttribute attribute[1];
        attribute[0].id = cudaLaunchAttributeCooperative;
        attribute[0].val.cooperative = 1;
        config.attrs = attribute;
        config.numAttrs = 1;
        CHECK(cudaLaunchKernelEx(&config, smooth, tmp, out, n));
    } else {
        void* args[] = {&tmp, &out, &n};
        CHECK(cudaLaunchCooperativeKernel((void*)smooth, dim3(sms), dim3(256), args, 0, a));
    }
    if (mode != "no-wait") {
        CHECK(cudaEventRecord(done, a));
        CHECK(cudaStreamWaitEvent(b, done, 0));
    }
    read_kernel<<<256, 256, 0, b>>>(out, sums, N);
    CHECK(cudaGetLastError());
    CHECK(cudaDeviceSynchronize());
    if (mode == "no-wait")
        ground_truth("race", "the cooperative kernel on stream a writes out; read_kernel on stream b reads it with nothing ordering them: read-after-write");
    else
        ground_truth("clean", "stream b waits on an event recorded after the cooperative launch before it reads out");
    return 0;
}
