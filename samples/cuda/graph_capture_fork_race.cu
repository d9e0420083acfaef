// A graph captured from stream a forks stream b (an event recorded in the capture), and a reads the buffer b is
// still writing: the two nodes have no dependency path, so every replay of the graph races.
#include "common.cuh"
int main() {
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 1024 * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t fork, join;
    CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeGlobal));
    CHECK(cudaEventRecord(fork, a));
    CHECK(cudaStreamWaitEvent(b, fork, 0));            // b joins the capture
    write_kernel<<<256, 256, 0, b>>>(buf, N, 1.f);
    read_kernel<<<256, 256, 0, a>>>(buf, out, N);     // nothing orders it after b's write
    CHECK(cudaEventRecord(join, b));
    CHECK(cudaStreamWaitEvent(a, join, 0));            // b rejoins only now
    CHECK(cudaStreamEndCapture(a, &graph));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int i = 0; i < 3; ++i) CHECK(cudaGraphLaunch(exec, a));
    CHECK(cudaStreamSynchronize(a));
    ground_truth("race", "inside the captured graph: write_kernel (forked stream b) and read_kernel (stream a) on buf, 3 replays");
    return 0;
}
