// Does asking a lazily loaded kernel's parameter layout (what the capture does on a kernel's first launch) load
// it, moving the launch's cost, or add to it? On the GPU machine:
//   nvcc -arch=sm_90 -o /tmp/lazy benches/lazy_layout_probe.cu -lcuda && /tmp/lazy
#include <cuda.h>
#include <cuda_runtime.h>
#include <chrono>
#include <cstdio>
__global__ void ka(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1.f; }
__global__ void kb(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] *= 2.f; }
__global__ void kc(float* p, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] -= 3.f; }
static double us(std::chrono::steady_clock::time_point a) { return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count(); }
int main() {
  float* p; cudaMalloc(&p, 4096); cudaDeviceSynchronize();
  auto t = std::chrono::steady_clock::now();
  ka<<<4, 256>>>(p, 1024); cudaDeviceSynchronize();
  printf("ka first launch alone: %.1f us\n", us(t));
  cudaKernel_t k; cudaGetKernel(&k, kb);
  t = std::chrono::steady_clock::now();
  const char* name; cuKernelGetName(&name, (CUkernel)k);
  printf("kb name query: %.1f us\n", us(t));
  t = std::chrono::steady_clock::now();
  size_t off, size; for (int i = 0; i < 2; i++) cuKernelGetParamInfo((CUkernel)k, i, &off, &size);
  printf("kb param queries: %.1f us\n", us(t));
  t = std::chrono::steady_clock::now();
  kb<<<4, 256>>>(p, 1024); cudaDeviceSynchronize();
  printf("kb first launch after the queries: %.1f us\n", us(t));
  t = std::chrono::steady_clock::now();
  kc<<<4, 256>>>(p, 1024); cudaDeviceSynchronize();
  printf("kc first launch alone: %.1f us\n", us(t));
  t = std::chrono::steady_clock::now();
  ka<<<4, 256>>>(p, 1024); cudaDeviceSynchronize();
  printf("ka second launch: %.1f us\n", us(t));
}
