// VARIANT: overlap
// One buffer split into per-stream slices, each stream writing only its own (NVIDIA's simpleStreams pattern):
// nothing orders the streams, and nothing needs to. With "overlap" each slice runs 256 elements into the next:
// those bytes are written by two unordered streams. Tier T1 sees one pointer into one block per launch and
// reports both as races; the exact-access capture (--exact) sees the bytes.
#include <cstring>
#include "common.cuh"
constexpr int STREAMS = 4;
int main(int argc, char** argv) {
    bool overlap = argc > 1 && std::strcmp(argv[1], "overlap") == 0;
    const int slice = N / STREAMS, spill = overlap ? 256 : 0;
    float* buf;
    CHECK(cudaMalloc(&buf, (N + spill) * sizeof(float)));
    cudaStream_t streams[STREAMS];
    for (auto& s : streams) CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    for (int i = 0; i < STREAMS; ++i) {
        write_kernel<<<64, 256, 0, streams[i]>>>(buf + i * slice, slice + spill, float(i));
    }
    CHECK(cudaDeviceSynchronize());
    if (overlap) {
        ground_truth("race", "write_kernel on neighbouring streams, write-after-write on the 1 KiB where slices overlap");
    } else {
        ground_truth("clean", "four streams write four disjoint slices of one buffer");
    }
    return 0;
}
