// A one-node graph writes buffer a while stream r reads buffer b, unordered but disjoint: clean. Then the
// executable graph's node is pointed at b (cudaGraphExecKernelNodeSetParams) and launched again while r reads
// b, with nothing ordering them: race on b.
#include "common.cuh"
int main() {
    float *a, *b, *out;
    CHECK(cudaMalloc(&a, N * sizeof(float)));
    CHECK(cudaMalloc(&b, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 1024 * sizeof(float)));
    cudaStream_t s, r;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&r, cudaStreamNonBlocking));
    CHECK(cudaMemset(b, 0, N * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    int n = N;
    float value = 1.f;
    void* args[] = {&a, &n, &value};
    cudaKernelNodeParams params{};
    params.func = (void*)write_kernel;
    params.gridDim = dim3(256);
    params.blockDim = dim3(256);
    params.kernelParams = args;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddKernelNode(&node, graph, nullptr, 0, &params));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    read_kernel<<<256, 256, 0, r>>>(b, out, N);    // b is not a's: no overlap
    CHECK(cudaDeviceSynchronize());
    void* args_b[] = {&b, &n, &value};
    params.kernelParams = args_b;
    CHECK(cudaGraphExecKernelNodeSetParams(exec, node, &params));
    CHECK(cudaGraphLaunch(exec, s));
    read_kernel<<<256, 256, 0, r>>>(b, out, N);    // now the node writes b: nothing orders them
    CHECK(cudaDeviceSynchronize());
    ground_truth("race", "after the exec update the graph's write_kernel writes b while read_kernel on stream r reads it");
    return 0;
}
