// The graph-replay benchmark: a graph of NODES small kernels captured once and replayed REPLAYS times (a decode
// loop's shape). `NODES` and `REPLAYS` come from argv (default 64 and 20000). Clean: every replay is on one
// stream. Prints the wall time of the replay loop for benches/gpu_graph_replay.sh.
#include <chrono>
#include <cstdlib>
#include "common.cuh"
int main(int argc, char** argv) {
    int nodes = argc > 1 ? std::atoi(argv[1]) : 64;
    int replays = argc > 2 ? std::atoi(argv[2]) : 20000;
    float* buf;
    CHECK(cudaMalloc(&buf, 1024 * sizeof(float)));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    for (int i = 0; i < nodes; ++i) write_kernel<<<1, 32, 0, s>>>(buf, 1024, float(i));
    CHECK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < replays; ++i) CHECK(cudaGraphLaunch(exec, s));
    CHECK(cudaStreamSynchronize(s));
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("REPLAY_LOOP nodes=%d replays=%d seconds=%.6f\n", nodes, replays, seconds);
    ground_truth("clean", "every replay on one stream");
    return 0;
}
