// What the capture adds to a cuBLAS call (benches/gpu_cublas_calls.sh): CALLS small gemms (64 x 64 floats, so
// that the host's side of the call is what is timed) on one stream, in windows of 1,000 each ended by a stream
// synchronize; prints the median window's time per call ("steady us/call") and the whole loop's.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cublas_v2.h>
#include <cuda_runtime.h>
int main(int argc, char** argv) {
    const int calls = argc > 1 ? std::atoi(argv[1]) : 20000;
    const int m = 64, window = 1000;
    float *a, *b, *c;
    cudaMalloc(&a, m * m * sizeof(float));
    cudaMalloc(&b, m * m * sizeof(float));
    cudaMalloc(&c, m * m * sizeof(float));
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cublasHandle_t h;
    if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
    cublasSetStream(h, s);
    const float one = 1.f, zero = 0.f;
    std::vector<double> windows;
    const auto begin = std::chrono::steady_clock::now();
    for (int done = 0; done < calls; done += window) {
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < window; ++i)
            cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, &one, a, m, b, m, &zero, c, m);
        cudaStreamSynchronize(s);
        windows.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    }
    const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    std::sort(windows.begin(), windows.end());
    std::printf("steady us/call %.3f loop s %.3f\n", windows[windows.size() / 2] / window, total);
    cublasDestroy(h);
    return 0;
}
