// A native loop with nvtxRangePushA("step") / nvtxRangePop around iteration 2, and a missing wait in iteration 0
// (outside the range) and in iteration 2 (inside). Captured by benches/gpu_jobs.sh with
// `--capture-range=nvtx --nvtx-capture=step`: only `scale_inside` racing `fill_inside` is reported.
#include <cstdio>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

__global__ void fill(float* p, int n, float v) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] = v; }
__global__ void scale(float* p, int n, float s) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] *= s; }

int main() {
  const int n = 1 << 20;
  float *outside = nullptr, *inside = nullptr;
  cudaMalloc(&outside, n * sizeof(float));
  cudaMalloc(&inside, n * sizeof(float));
  cudaStream_t a, b;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaEvent_t done;
  cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
  for (int it = 0; it < 4; ++it) {
    if (it == 2) nvtxRangePushA("step");
    float* buf = it == 2 ? inside : outside;
    fill<<<n / 256, 256, 0, a>>>(buf, n, 1.0f);
    if (it != 0 && it != 2) {
      cudaEventRecord(done, a);
      cudaStreamWaitEvent(b, done, 0);
    }
    scale<<<n / 256, 256, 0, b>>>(buf, n, 2.0f);  // iterations 0 and 2: no wait for fill
    cudaDeviceSynchronize();
    if (it == 2) nvtxRangePop();
  }
  printf("GROUND_TRUTH whole run: fill/scale race on `outside` (iteration 0) and `inside` (iteration 2); nvtx range `step`: only `inside`\n");
  return 0;
}
