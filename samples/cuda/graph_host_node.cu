// VARIANT: no-edge
// A graph built node by node: a host node fills a pinned host buffer, then a read_kernel node reads that buffer
// straight from the device (a mapped pinned pointer). With the edge host node -> kernel node the read comes after
// the host function returned (clean, DESIGN.md rules 9 and 13); with "no-edge" both nodes are roots of the graph and
// nothing orders them (race: the host function's stores and the kernel's loads of the same pinned bytes).
#include <cstring>
#include "common.cuh"

struct Fill {
    float* data;
    int n;
};

static void CUDART_CB fill_on_host(void* arg) {
    Fill* fill = static_cast<Fill*>(arg);
    for (int i = 0; i < fill->n; ++i) fill->data[i] = 0.5f * i;
}

int main(int argc, char** argv) {
    bool edge = !(argc > 1 && std::strcmp(argv[1], "no-edge") == 0);
    float *host, *out;
    CHECK(cudaMallocHost(&host, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    Fill fill{host, N};
    cudaHostNodeParams host_params{};
    host_params.fn = fill_on_host;
    host_params.userData = &fill;
    cudaGraphNode_t filler, reader;
    CHECK(cudaGraphAddHostNode(&filler, graph, nullptr, 0, &host_params));
    int n = N;
    const float* input = host;
    void* read_args[] = {&input, &out, &n};
    cudaKernelNodeParams read{};
    read.func = (void*)read_kernel;
    read.gridDim = dim3(256);
    read.blockDim = dim3(256);
    read.kernelParams = read_args;
    CHECK(cudaGraphAddKernelNode(&reader, graph, edge ? &filler : nullptr, edge ? 1 : 0, &read));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    if (edge)
        ground_truth("clean", "the edge orders the host node's fill of the pinned buffer before the read_kernel node");
    else
        ground_truth("race", "a host node writes the pinned buffer that a read_kernel node of the same graph reads, no edge between them: the host write and the kernel read unordered");
    return 0;
}
