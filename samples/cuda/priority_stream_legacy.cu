// VARIANT: nonblocking
// A stream made with cudaStreamCreateWithPriority and the cudaStreamDefault flag is a blocking stream: a kernel
// on the legacy default stream waits for its earlier work (DESIGN.md rule 7: clean). With "nonblocking" it is made
// with cudaStreamNonBlocking and the same priority: the legacy default stream does not wait for it (race:
// write_kernel on the priority stream and read_kernel on the legacy default stream, read-after-write).
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    bool nonblocking = argc > 1 && std::strcmp(argv[1], "nonblocking") == 0;
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    CHECK(cudaDeviceSynchronize());
    int least = 0, greatest = 0;
    CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithPriority(&s, nonblocking ? cudaStreamNonBlocking : cudaStreamDefault, greatest));
    write_kernel<<<256, 256, 0, s>>>(buf, N, 1.f);
    read_kernel<<<256, 256>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    if (nonblocking)
        ground_truth("race", "write_kernel on a non-blocking priority stream and read_kernel on the legacy default stream: read-after-write");
    else
        ground_truth("clean", "the legacy default stream waits for the blocking priority stream's write_kernel");
    return 0;
}
