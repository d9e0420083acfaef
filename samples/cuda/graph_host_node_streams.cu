// VARIANT: no-wait
// A graph's host node refills a pinned host buffer that a kernel on another stream reads (DESIGN.md rules 9, 12
// and 13). Without an argument, read_kernel on stream b reads the buffer (mapped) and stream s waits on an event
// recorded after it before launching the graph: clean. With "no-wait" s launches the graph without that wait:
// the host node's stores and b's loads are unordered (write-after-read).
#include <cstring>
#include "common.cuh"

struct Fill {
    float* data;
    int n;
};

static void CUDART_CB refill_on_host(void* arg) {
    Fill* fill = static_cast<Fill*>(arg);
    for (int i = 0; i < fill->n; ++i) fill->data[i] = 0.25f * i;
}

int main(int argc, char** argv) {
    bool ordered = !(argc > 1 && std::strcmp(argv[1], "no-wait") == 0);
    float *host, *out;
    CHECK(cudaHostAlloc(&host, N * sizeof(float), cudaHostAllocMapped));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t s, b;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t read_done;
    CHECK(cudaEventCreateWithFlags(&read_done, cudaEventDisableTiming));
    cudaGraph_t graph;
    CHECK(cudaGraphCreate(&graph, 0));
    Fill fill{host, N};
    cudaHostNodeParams host_params{};
    host_params.fn = refill_on_host;
    host_params.userData = &fill;
    cudaGraphNode_t refill;
    CHECK(cudaGraphAddHostNode(&refill, graph, nullptr, 0, &host_params));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    read_kernel<<<256, 256, 0, b>>>(host, out, N);
    CHECK(cudaEventRecord(read_done, b));
    if (ordered) CHECK(cudaStreamWaitEvent(s, read_done, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    CHECK(cudaStreamSynchronize(b));
    if (ordered)
        ground_truth("clean", "the graph's launch waits on an event recorded after b's read_kernel, so the host node's refill comes after the read");
    else
        ground_truth("race", "the graph's host node refills the pinned buffer that read_kernel on b may still be reading: write-after-read");
    return 0;
}
