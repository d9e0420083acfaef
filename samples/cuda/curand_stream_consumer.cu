// LINK: -lcurand
// VARIANT: no-wait
// cuRAND's host API on an explicit stream: curandSetStream(gen, a), then curandGenerateUniform fills buf on a (a
// first call, synchronized, has done the generator's setup); read_kernel reads buf on non-blocking stream b.
// Without an argument b waits on an event recorded on a after the generation (clean); with "no-wait" nothing
// orders them (race: cuRAND's generating kernel writes buf while read_kernel may read it, read-after-write).
#include <curand.h>
#include <cstring>
#include "common.cuh"
#define CURAND_CHECK(call)                                                              \
    do {                                                                                \
        curandStatus_t st_ = (call);                                                    \
        if (st_ != CURAND_STATUS_SUCCESS) {                                             \
            std::fprintf(stderr, "%s:%d: curand status %d\n", __FILE__, __LINE__, st_); \
            std::exit(1);                                                               \
        }                                                                               \
    } while (0)
int main(int argc, char** argv) {
    bool wait = !(argc > 1 && std::strcmp(argv[1], "no-wait") == 0);
    float *buf, *out;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t generated;
    CHECK(cudaEventCreateWithFlags(&generated, cudaEventDisableTiming));
    curandGenerator_t gen;
    CURAND_CHECK(curandCreateGenerator(&gen, CURAND_RNG_PSEUDO_PHILOX4_32_10));
    CURAND_CHECK(curandSetPseudoRandomGeneratorSeed(gen, 1234ULL));
    CURAND_CHECK(curandSetStream(gen, a));
    CURAND_CHECK(curandGenerateUniform(gen, buf, N));
    CHECK(cudaDeviceSynchronize());
    CURAND_CHECK(curandGenerateUniform(gen, buf, N));
    if (wait) {
        CHECK(cudaEventRecord(generated, a));
        CHECK(cudaStreamWaitEvent(b, generated, 0));
    }
    read_kernel<<<256, 256, 0, b>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    CURAND_CHECK(curandDestroyGenerator(gen));
    if (wait)
        ground_truth("clean", "stream b waits on an event recorded on a after curandGenerateUniform before read_kernel reads buf");
    else
        ground_truth("race", "curandGenerateUniform's kernel on stream a writes buf and read_kernel on b reads it, unordered: read-after-write");
    return 0;
}
