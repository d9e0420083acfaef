// VARIANT: no-sync
// VARIANT: memcpy-node
// VARIANT: memcpy-node-no-sync
// A graph built node by node writes pinned host memory, and the host reads it after cudaGraphLaunch. Without an
// argument a write_kernel node writes the mapped pinned buffer straight from the device; with "memcpy-node" a
// write_kernel node fills a device buffer and a memcpy node (DtoH, after it) copies it into the pinned buffer.
// The host reads after cudaStreamSynchronize (clean); with "no-sync" / "memcpy-node-no-sync" right after the
// launch (race: the graph's write of the pinned bytes and the host's read, read-after-write; DESIGN.md rules 9, 12).
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    const char* mode = argc > 1 ? argv[1] : "";
    bool copy_node = std::strncmp(mode, "memcpy-node", 11) == 0;
    bool synced = std::strstr(mode, "no-sync") == nullptr;
    float *host, *dev;
    CHECK(cudaHostAlloc(&host, N * sizeof(float), cudaHostAllocMapped));
    CHECK(cudaMalloc(&dev, N * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    int n = N;
    float value = 4.f;
    float* target = copy_node ? dev : host;
    void* write_args[] = {&target, &n, &value};
    cudaKernelNodeParams write{};
    write.func = (void*)write_kernel;
    write.gridDim = dim3(256);
    write.blockDim = dim3(256);
    write.kernelParams = write_args;
    cudaGraphNode_t writer, copier;
    CHECK(cudaGraphAddKernelNode(&writer, graph, nullptr, 0, &write));
    if (copy_node)
        CHECK(cudaGraphAddMemcpyNode1D(&copier, graph, &writer, 1, host, dev, N * sizeof(float), cudaMemcpyDeviceToHost));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    if (synced) CHECK(cudaStreamSynchronize(s));
    volatile float middle = host[N / 2];
    (void)middle;
    CHECK(cudaStreamSynchronize(s));
    if (synced)
        ground_truth("clean", "the host reads the pinned buffer after cudaStreamSynchronize of the graph's stream");
    else
        ground_truth("race", "the graph's node writes the pinned buffer and the host reads it right after cudaGraphLaunch: read-after-write");
    return 0;
}
