// VARIANT: no-wait
// A captured graph writes buf; it is replayed on stream s, and stream r reads buf. With an argument "no-wait"
// r reads without waiting (race with the replayed node); otherwise r waits on an event recorded after the
// replay (clean). The capture itself runs nothing: r's reads are compared with the replay, not the capture.
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    bool wait = !(argc > 1 && std::strcmp(argv[1], "no-wait") == 0);
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 1024 * sizeof(float)));
    cudaStream_t s, r;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&r, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    cudaGraph_t graph;
    CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    write_kernel<<<256, 256, 0, s>>>(buf, N, 1.f);
    CHECK(cudaStreamEndCapture(s, &graph));
    cudaGraphExec_t exec;
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, s));
    if (wait) {
        CHECK(cudaEventRecord(done, s));
        CHECK(cudaStreamWaitEvent(r, done, 0));
    }
    read_kernel<<<256, 256, 0, r>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    if (wait)
        ground_truth("clean", "r waits on an event recorded after the replay");
    else
        ground_truth("race", "read_kernel on stream r and the replayed write_kernel node on buf");
    return 0;
}
