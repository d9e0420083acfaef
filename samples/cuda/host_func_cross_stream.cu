// VARIANT: event-wait
// Stream a copies a kernel's result into pinned host memory; a host function enqueued on stream b
// (cudaLaunchHostFunc) sums it. Without an argument nothing orders b after a (race: the host function, run on a
// driver thread once b's earlier work is done, reads what a's copy writes; the capture sees its read fault inside
// the function and puts it at the function's place on b); with "event-wait" b waits on an event recorded after
// the copy (clean).
#include <cstring>
#include "common.cuh"

struct Sum {
    const float* data;
    int n;
    double total;
};

static void CUDART_CB sum_on_host(void* arg) {
    Sum* sum = static_cast<Sum*>(arg);
    double total = 0;
    for (int i = 0; i < sum->n; ++i) total += sum->data[i];
    sum->total = total;
}

int main(int argc, char** argv) {
    bool ordered = argc > 1 && std::strcmp(argv[1], "event-wait") == 0;
    float *dev, *host;
    CHECK(cudaMalloc(&dev, N * sizeof(float)));
    CHECK(cudaMallocHost(&host, N * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t copied;
    CHECK(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming));
    write_kernel<<<256, 256, 0, a>>>(dev, N, 1.f);
    CHECK(cudaMemcpyAsync(host, dev, N * sizeof(float), cudaMemcpyDeviceToHost, a));
    if (ordered) {
        CHECK(cudaEventRecord(copied, a));
        CHECK(cudaStreamWaitEvent(b, copied, 0));
    }
    Sum sum{host, N, 0};
    CHECK(cudaLaunchHostFunc(b, sum_on_host, &sum));
    CHECK(cudaDeviceSynchronize());
    if (ordered) {
        std::printf("sum = %.0f\n", sum.total);
        ground_truth("clean", "stream b waits on an event recorded after a's copy before its host function reads the buffer");
    } else {
        ground_truth("race", "a host function on stream b reads the pinned buffer that cudaMemcpyAsync DtoH on stream a writes: read-after-write");
    }
    return 0;
}
