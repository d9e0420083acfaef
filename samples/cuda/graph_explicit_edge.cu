// VARIANT: no-edge
// A graph built node by node: a write_kernel node, then a read_kernel node of the same buffer. With an argument
// "no-edge" the read is added without depending on the write (race); otherwise with the edge (clean).
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    bool edge = !(argc > 1 && std::strcmp(argv[1], "no-edge") == 0);
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 1024 * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    int n = N;
    float value = 1.f;
    void* write_args[] = {&buf, &n, &value};
    cudaKernelNodeParams write{};
    write.func = (void*)write_kernel;
    write.gridDim = dim3(256);
    write.blockDim = dim3(256);
    write.kernelParams = write_args;
    cudaGraphNode_t producer, consumer;
    CHECK(cudaGraphAddKernelNode(&producer, graph, nullptr, 0, &write));
    void* read_args[] = {&buf, &out, &n};
    cudaKernelNodeParams read = write;
    read.func = (void*)read_kernel;
    read.kernelParams = read_args;
    CHECK(cudaGraphAddKernelNode(&consumer, graph, edge ? &producer : nullptr, edge ? 1 : 0, &read));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    if (edge)
        ground_truth("clean", "the edge orders the write_kernel node before the read_kernel node");
    else
        ground_truth("race", "write_kernel and read_kernel nodes of one graph on buf, no edge between them");
    return 0;
}
