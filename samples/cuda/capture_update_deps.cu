// A capture on stream a writes buf, then adds a memset node to the graph being captured by hand (the graph from
// cudaStreamGetCaptureInfo, as graphConditionalNodes and torch.cond's capture add their conditional nodes) and
// makes the stream's next node depend on it with cudaStreamUpdateCaptureDependencies. With SET and a memset node
// that depends on nothing, the read that follows on a is no longer after the write: every replay races, though
// the stream order alone would say the read comes after the write. Variants: `after` (the memset node after the
// nodes the driver named, then SET: ordered through it), `add` (ADD instead of SET: the write stays in the set).
// VARIANT: after
// VARIANT: add
#include <cstring>
#include "common.cuh"

int main(int argc, char** argv) {
    const char* variant = argc > 1 ? argv[1] : "set";
    bool after = std::strcmp(variant, "after") == 0, add = std::strcmp(variant, "add") == 0;
    float *buf, *out;
    int* flag;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 1024 * sizeof(float)));
    CHECK(cudaMalloc(&flag, 256 * sizeof(int)));
    cudaStream_t a;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    // The graph being captured, and the node the stream's next work would depend on (the write).
    cudaStreamCaptureStatus status;
    cudaGraph_t capturing;
    const cudaGraphNode_t* deps;
    size_t count;
#if CUDART_VERSION >= 13000
    CHECK(cudaStreamGetCaptureInfo(a, &status, nullptr, &capturing, &deps, nullptr, &count));
#else
    CHECK(cudaStreamGetCaptureInfo(a, &status, nullptr, &capturing, &deps, &count));
#endif
    cudaMemsetParams set = {};
    set.dst = flag;
    set.value = 1;
    set.elementSize = sizeof(int);
    set.width = 256;
    set.height = 1;
    cudaGraphNode_t node;
    CHECK(cudaGraphAddMemsetNode(&node, capturing, after ? deps : nullptr, after ? count : 0, &set));
    unsigned flags = add ? cudaStreamAddCaptureDependencies : cudaStreamSetCaptureDependencies;
#if CUDART_VERSION >= 13000
    CHECK(cudaStreamUpdateCaptureDependencies(a, &node, nullptr, 1, flags));
#else
    CHECK(cudaStreamUpdateCaptureDependencies(a, &node, 1, flags));
#endif
    read_kernel<<<256, 256, 0, a>>>(buf, out, N);
    CHECK(cudaStreamEndCapture(a, &graph));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, a));
    CHECK(cudaStreamSynchronize(a));
    if (after || add)
        ground_truth("clean", after ? "the hand-added memset node after the write, the read after it (SET)"
                                    : "the read after the write and the hand-added memset node (ADD)");
    else
        ground_truth("race", "inside the captured graph: write_kernel and read_kernel on buf, the read's dependencies "
                             "set to a hand-added memset node that depends on nothing, 3 replays");
    return 0;
}
