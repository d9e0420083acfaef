// What the GPU machine gives the host watch (benches/gpu_host_watch.sh runs this plainly and under capture):
// - managed memory: the device's managed-memory attributes, and one host read of a managed page the GPU wrote,
//   bracketed by CLOCK_MONOTONIC stamps (`PROBE managed_touch T0 T1 ADDRESS`), which the script compares with the
//   `host_access` CUPTI's CPU page fault became in the trace (is it delivered, at which time, how late);
// - pinned memory: the /proc/self/maps line of a cudaMallocHost buffer and of a cudaHostRegister'ed one (a
//   shared mapping of the driver's file, or anonymous memory: docs/capture.md, host watch), and the kernel;
// - host functions: which thread the driver runs one on, and whether a fault inside it reaches the trace with
//   its `host_func` (the trampoline took: the driver runs what the parameter block holds after the callback).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>
#include <sys/syscall.h>
#include <cuda_runtime.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t err_ = (call);                                                         \
        if (err_ != cudaSuccess) {                                                         \
            std::printf("PROBE error %s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(err_)); \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

static unsigned long long now_ns() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static void print_mapping(const char* what, const void* p) {
    FILE* maps = std::fopen("/proc/self/maps", "r");
    char line[512];
    unsigned long address = reinterpret_cast<unsigned long>(p);
    while (maps && std::fgets(line, sizeof line, maps)) {
        unsigned long from, to;
        if (std::sscanf(line, "%lx-%lx", &from, &to) == 2 && from <= address && address < to) {
            std::printf("PROBE mapping %s %s", what, line);
        }
    }
    if (maps) std::fclose(maps);
}

__global__ void fill(float* data, int n) {
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) data[i] = float(i);
}

struct HostRead {
    const float* data;
    long tid;
    float value;
};

static void CUDART_CB read_on_host(void* arg) {
    HostRead* read = static_cast<HostRead*>(arg);
    read->tid = syscall(SYS_gettid);
    read->value = read->data[1];
}

int main() {
    int device = 0, concurrent = 0, pageable = 0, host_table = 0;
    CHECK(cudaGetDevice(&device));
    cudaDeviceGetAttribute(&concurrent, cudaDevAttrConcurrentManagedAccess, device);
    cudaDeviceGetAttribute(&pageable, cudaDevAttrPageableMemoryAccess, device);
    cudaDeviceGetAttribute(&host_table, cudaDevAttrPageableMemoryAccessUsesHostPageTables, device);
    std::printf("PROBE managed_attributes concurrent=%d pageable=%d host_page_tables=%d\n", concurrent, pageable, host_table);

    const int n = 1 << 16;
    float* managed;
    CHECK(cudaMallocManaged(&managed, n * sizeof(float)));
    fill<<<64, 256>>>(managed, n);
    CHECK(cudaDeviceSynchronize());
    unsigned long long t0 = now_ns();
    volatile float seen = managed[n / 2];
    unsigned long long t1 = now_ns();
    std::printf("PROBE managed_touch %llu %llu %p %.0f\n", t0, t1, static_cast<void*>(managed + n / 2), (float)seen);

    float* pinned;
    CHECK(cudaMallocHost(&pinned, n * sizeof(float)));
    print_mapping("cudaMallocHost", pinned);
    float* registered = static_cast<float*>(std::aligned_alloc(4096, n * sizeof(float)));
    CHECK(cudaHostRegister(registered, n * sizeof(float), cudaHostRegisterDefault));
    print_mapping("cudaHostRegister", registered);

    float* dev;
    CHECK(cudaMalloc(&dev, n * sizeof(float)));
    fill<<<64, 256>>>(dev, n);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CHECK(cudaMemcpyAsync(pinned, dev, n * sizeof(float), cudaMemcpyDeviceToHost, s));
    HostRead read{pinned, 0, 0};
    CHECK(cudaLaunchHostFunc(s, read_on_host, &read));
    CHECK(cudaStreamSynchronize(s));
    std::printf("PROBE host_func main_tid=%ld driver_tid=%ld value=%.0f\n", (long)syscall(SYS_gettid), read.tid, read.value);

    CHECK(cudaHostUnregister(registered));
    std::free(registered);
    CHECK(cudaFreeHost(pinned));
    CHECK(cudaFree(managed));
    CHECK(cudaFree(dev));
    std::printf("PROBE done\n");
    return 0;
}
