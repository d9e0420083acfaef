// Shared by the samples: two kernels, an error check, and the ground-truth line each sample prints.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

#define CHECK(call)                                                                              \
    do {                                                                                         \
        cudaError_t err_ = (call);                                                               \
        if (err_ != cudaSuccess) {                                                               \
            std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(err_));   \
            std::exit(1);                                                                        \
        }                                                                                        \
    } while (0)

// A cuBLAS call that must succeed (expands only where used, so other samples need no cuBLAS header).
#define CUBLAS_CHECK(call)                                                               \
    do {                                                                                 \
        if ((call) != CUBLAS_STATUS_SUCCESS) {                                           \
            std::fprintf(stderr, "%s:%d: cuBLAS call failed\n", __FILE__, __LINE__);   \
            std::exit(1);                                                                \
        }                                                                                \
    } while (0)

constexpr int N = 1 << 20;

// Writes every element: long enough (many blocks) that two of them can overlap on the GPU.
__global__ void write_kernel(float* data, int n, float value) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) data[i] = value * i;
}

// Reads every element and writes a private result.
__global__ void read_kernel(const float* data, float* out, int n) {
    float sum = 0.f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) sum += data[i];
    if (threadIdx.x == 0) out[blockIdx.x] = sum;
}

inline void ground_truth(const char* verdict, const char* what) { std::printf("GROUND_TRUTH %s: %s\n", verdict, what); }
