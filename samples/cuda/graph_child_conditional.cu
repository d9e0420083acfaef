// VARIANT: child-no-edge
// VARIANT: cond
// VARIANT: cond-no-edge
// VARIANT: capture-to-graph
// Graphs with a child graph node, an IF conditional node, and cudaStreamBeginCaptureToGraph (DESIGN.md rule 9).
// Without an argument: a child graph holds a write_kernel node of buf; the parent graph has the child node and a
// read_kernel node of buf that depends on it (clean); "child-no-edge": the read node depends on nothing (race:
// read-after-write inside every launch). "cond": the parent has an IF node whose condition defaults to 1 and whose
// body holds the write_kernel node, and the read node depends on the IF node (clean); "cond-no-edge": no edge
// (race). "capture-to-graph": the parent gets a write_kernel node by hand, then stream s captures a read_kernel into
// the same graph with cudaStreamBeginCaptureToGraph, naming the write node as the captured work's dependency
// (clean: the read node depends on the write node).
#include <string>
#include "common.cuh"
static cudaKernelNodeParams kernel_params(void* func, void** args) {
    cudaKernelNodeParams p{};
    p.func = func;
    p.gridDim = dim3(256);
    p.blockDim = dim3(256);
    p.kernelParams = args;
    return p;
}
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "child";
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    int n = N;
    float value = 2.f;
    const float* input = buf;
    void* write_args[] = {&buf, &n, &value};
    void* read_args[] = {&input, &out, &n};
    cudaKernelNodeParams write = kernel_params((void*)write_kernel, write_args);
    cudaKernelNodeParams read = kernel_params((void*)read_kernel, read_args);
    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    cudaGraphNode_t first, writer, reader;
    const bool edge = mode == "child" || mode == "cond" || mode == "capture-to-graph";
    if (mode.rfind("child", 0) == 0) {
        cudaGraph_t child;
        CHECK(cudaGraphCreate(&child, 0));
        CHECK(cudaGraphAddKernelNode(&writer, child, nullptr, 0, &write));
        CHECK(cudaGraphAddChildGraphNode(&first, graph, nullptr, 0, child));
        CHECK(cudaGraphAddKernelNode(&reader, graph, edge ? &first : nullptr, edge ? 1 : 0, &read));
    } else if (mode.rfind("cond", 0) == 0) {
        cudaGraphConditionalHandle handle;
        CHECK(cudaGraphConditionalHandleCreate(&handle, graph, 1, cudaGraphCondAssignDefault));
        cudaGraphNodeParams cond = {cudaGraphNodeTypeConditional};
        cond.conditional.handle = handle;
        cond.conditional.type = cudaGraphCondTypeIf;
        cond.conditional.size = 1;
        CHECK(cudaGraphAddNode(&first, graph, nullptr, nullptr, 0, &cond));
        cudaGraph_t body = cond.conditional.phGraph_out[0];
        CHECK(cudaGraphAddKernelNode(&writer, body, nullptr, 0, &write));
        CHECK(cudaGraphAddKernelNode(&reader, graph, edge ? &first : nullptr, edge ? 1 : 0, &read));
    } else {
        CHECK(cudaGraphAddKernelNode(&first, graph, nullptr, 0, &write));
        CHECK(cudaStreamBeginCaptureToGraph(s, graph, &first, nullptr, 1, cudaStreamCaptureModeGlobal));
        read_kernel<<<256, 256, 0, s>>>(buf, out, N);
        CHECK(cudaGetLastError());
        cudaGraph_t captured;
        CHECK(cudaStreamEndCapture(s, &captured));
    }
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    if (mode == "child")
        ground_truth("clean", "the read_kernel node depends on the child graph node whose graph writes buf");
    else if (mode == "child-no-edge")
        ground_truth("race", "a child graph node writes buf and a read_kernel node of the same graph reads it, no edge between them: read-after-write");
    else if (mode == "cond")
        ground_truth("clean", "the read_kernel node depends on the IF node whose body writes buf");
    else if (mode == "cond-no-edge")
        ground_truth("race", "an IF node's body (condition 1) writes buf and a read_kernel node of the same graph reads it, no edge: read-after-write");
    else
        ground_truth("clean", "read_kernel captured into the graph with cudaStreamBeginCaptureToGraph depends on the hand-added write node");
    return 0;
}
