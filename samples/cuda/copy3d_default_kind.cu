// VARIANT: 3d-no-wait
// VARIANT: default-kind
// VARIANT: default-kind-no-wait
// Copies other than the plain 1D kinds, between a kernel's write and another stream. Without an argument a kernel
// on non-blocking stream a fills a 3D volume allocated with cudaMalloc3D, and cudaMemcpy3DAsync copies it into a
// second volume on non-blocking stream b, which waits on an event recorded after the kernel (clean); "3d-no-wait":
// no wait (race: the 3D copy reads what the kernel writes, read-after-write). "default-kind": the kernel fills a
// device buffer and cudaMemcpyAsync with cudaMemcpyDefault (direction from the pointers, UVA) copies it into pinned
// host memory on b after the wait, b is synchronized and the host reads (clean); "default-kind-no-wait": no wait
// (race: read-after-write between the kernel and the copy).
#include <string>
#include "common.cuh"
int main(int argc, char** argv) {
    const std::string mode = argc > 1 ? argv[1] : "3d";
    const bool wait = mode == "3d" || mode == "default-kind";
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t written;
    CHECK(cudaEventCreateWithFlags(&written, cudaEventDisableTiming));
    if (mode.rfind("3d", 0) == 0) {
        const int w = 500, h = 64, d = 32;  // 500 floats a row: rows padded to the pitch
        cudaExtent extent = make_cudaExtent(w * sizeof(float), h, d);
        cudaPitchedPtr src, dst;
        CHECK(cudaMalloc3D(&src, extent));
        CHECK(cudaMalloc3D(&dst, extent));
        const int elements = int(src.pitch / sizeof(float)) * h * d;
        write_kernel<<<256, 256, 0, a>>>(static_cast<float*>(src.ptr), elements, 1.f);
        CHECK(cudaGetLastError());
        if (wait) {
            CHECK(cudaEventRecord(written, a));
            CHECK(cudaStreamWaitEvent(b, written, 0));
        }
        cudaMemcpy3DParms params{};
        params.srcPtr = src;
        params.dstPtr = dst;
        params.extent = extent;
        params.kind = cudaMemcpyDeviceToDevice;
        CHECK(cudaMemcpy3DAsync(&params, b));
        CHECK(cudaDeviceSynchronize());
    } else {
        float *dev, *host;
        CHECK(cudaMalloc(&dev, N * sizeof(float)));
        CHECK(cudaMallocHost(&host, N * sizeof(float)));
        write_kernel<<<256, 256, 0, a>>>(dev, N, 1.f);
        CHECK(cudaGetLastError());
        if (wait) {
            CHECK(cudaEventRecord(written, a));
            CHECK(cudaStreamWaitEvent(b, written, 0));
        }
        CHECK(cudaMemcpyAsync(host, dev, N * sizeof(float), cudaMemcpyDefault, b));
        CHECK(cudaStreamSynchronize(b));
        std::printf("host[N/2] = %.1f\n", wait ? host[N / 2] : 0.f);
        CHECK(cudaDeviceSynchronize());
    }
    if (mode == "3d")
        ground_truth("clean", "cudaMemcpy3DAsync on stream b waits on an event recorded after a's write of the source volume");
    else if (mode == "3d-no-wait")
        ground_truth("race", "write_kernel on stream a writes the volume cudaMemcpy3DAsync on stream b reads: read-after-write");
    else if (mode == "default-kind")
        ground_truth("clean", "cudaMemcpyAsync(cudaMemcpyDefault) device to pinned host on b after waiting on a's write; the host reads after synchronizing b");
    else
        ground_truth("race", "write_kernel on stream a writes dev while cudaMemcpyAsync(cudaMemcpyDefault) on stream b copies it out: read-after-write");
    return 0;
}
