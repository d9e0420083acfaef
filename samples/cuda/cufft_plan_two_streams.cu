// LINK: -lcufft
// VARIANT: event
// VARIANT: two-plans
// One cuFFT plan executed on two non-blocking streams (cufftSetStream between the two cufftExecC2C calls), each
// on its own buffer. The plan has one work area (cufftGetSize), which every execution of it uses: run on two
// unordered streams, the two executions write the same work area (race, write-after-write on cuFFT's internal
// allocation; cuFFT's documentation forbids running one plan concurrently). "event": stream b waits on an event
// recorded after the first execution (clean). "two-plans": each stream has a plan of its own, so its own work
// area (clean). Where the plan needs no work area at all the program says so and the default is clean too.
#include <cufft.h>
#include <string>
#include "common.cuh"
#define CUFFT_CHECK(call)                                                 \
    do {                                                                  \
        if ((call) != CUFFT_SUCCESS) {                                    \
            std::fprintf(stderr, "%s:%d: cuFFT call failed\n", __FILE__, __LINE__); \
            std::exit(1);                                                 \
        }                                                                 \
    } while (0)
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "shared-plan";
    const int n = 1 << 22;
    cufftComplex *x1, *x2;
    CHECK(cudaMalloc(&x1, n * sizeof(cufftComplex)));
    CHECK(cudaMalloc(&x2, n * sizeof(cufftComplex)));
    CHECK(cudaMemset(x1, 0, n * sizeof(cufftComplex)));
    CHECK(cudaMemset(x2, 0, n * sizeof(cufftComplex)));
    cudaStream_t sa, sb;
    CHECK(cudaStreamCreateWithFlags(&sa, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&sb, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    cufftHandle plan, plan2;
    CUFFT_CHECK(cufftPlan1d(&plan, n, CUFFT_C2C, 1));
    CUFFT_CHECK(cufftPlan1d(&plan2, n, CUFFT_C2C, 1));
    size_t work = 0;
    CUFFT_CHECK(cufftGetSize(plan, &work));
    std::printf("work area of the plan: %zu bytes\n", work);
    CHECK(cudaDeviceSynchronize());
    CUFFT_CHECK(cufftSetStream(plan, sa));
    CUFFT_CHECK(cufftExecC2C(plan, x1, x1, CUFFT_FORWARD));
    if (mode == "event") {
        CHECK(cudaEventRecord(done, sa));
        CHECK(cudaStreamWaitEvent(sb, done, 0));
    }
    cufftHandle second = mode == "two-plans" ? plan2 : plan;
    CUFFT_CHECK(cufftSetStream(second, sb));
    CUFFT_CHECK(cufftExecC2C(second, x2, x2, CUFFT_FORWARD));
    CHECK(cudaDeviceSynchronize());
    CUFFT_CHECK(cufftDestroy(plan));
    CUFFT_CHECK(cufftDestroy(plan2));
    if (mode == "shared-plan" && work > 0)
        ground_truth("race", "one plan executed on streams a and b with nothing between them: both executions use the plan's work area, write-after-write");
    else if (mode == "shared-plan")
        ground_truth("clean", "one plan on two streams, but the plan has no work area: the buffers are disjoint");
    else if (mode == "event")
        ground_truth("clean", "the second execution of the plan waits on an event recorded after the first");
    else
        ground_truth("clean", "each stream executes its own plan (its own work area) on its own buffer");
    return 0;
}
