// VARIANT: no-grid-sync
// Programmatic dependent launch (Hopper): the reader is launched with cudaLaunchKernelEx and
// cudaLaunchAttributeProgrammaticStreamSerialization on the writer's own stream, and the writer lets it start
// early (griddepcontrol.launch_dependents at its start). Stream order then no longer holds between the two
// kernels: the reader must wait with griddepcontrol.wait (cudaGridDependencySynchronize) before it reads the
// writer's output. Without an argument it does (clean); with "no-grid-sync" it reads right away (race on one
// stream: the reader may run while the writer still writes, read-after-write).
#include <cstring>
#include "common.cuh"
__global__ void early_writer(float* data, int n, float value) {
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) data[i] = value * i;
}
__global__ void dependent_reader(const float* data, float* out, int n, int wait) {
    if (wait) asm volatile("griddepcontrol.wait;" ::: "memory");
    float sum = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) sum += data[i];
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}
int main(int argc, char** argv) {
    int wait = !(argc > 1 && std::strcmp(argv[1], "no-grid-sync") == 0);
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    early_writer<<<256, 256, 0, s>>>(buf, N, 1.f);
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(256);
    cfg.blockDim = dim3(256);
    cfg.stream = s;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    const float* input = buf;
    CHECK(cudaLaunchKernelEx(&cfg, dependent_reader, input, out, N, wait));
    CHECK(cudaStreamSynchronize(s));
    if (wait)
        ground_truth("clean", "the dependent reader waits (griddepcontrol.wait) for the writer before reading");
    else
        ground_truth("race", "a programmatic dependent launch on the writer's stream reads buf without griddepcontrol.wait: read-after-write on one stream");
    return 0;
}
