// VARIANT: stream-sync
// VARIANT: read-into
// A checkpoint writer: a kernel fills a device buffer, cudaMemcpyAsync copies it into pinned host memory, and the
// host writes the pinned buffer to a file with fwrite. The kernel, not the program, reads the buffer inside the
// system call: no load of the program's faults. Without an argument fwrite runs right after the copy is issued
// (race: the file may get bytes the copy has not written yet); with "stream-sync" after cudaStreamSynchronize
// (clean). With "read-into", the loader's side: fread fills a pinned buffer from the file while an H2D copy of
// that same buffer is still in flight (race: the copy may send the new bytes). Each prints how many bytes its
// I/O moved, which must be all of them under capture as plain.
#include <cstring>
#include "common.cuh"
int main(int argc, char** argv) {
    const char* variant = argc > 1 ? argv[1] : "";
    bool synced = std::strcmp(variant, "stream-sync") == 0;
    bool read_into = std::strcmp(variant, "read-into") == 0;
    const size_t bytes = N * sizeof(float);
    float *dev, *host;
    CHECK(cudaMalloc(&dev, bytes));
    CHECK(cudaMallocHost(&host, bytes));
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    char path[] = "/tmp/streamtrace-ckpt-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 2;
    FILE* file = fdopen(fd, "w+b");
    if (read_into) {
        std::memset(host, 1, bytes);
        if (std::fwrite(host, 1, bytes, file) != bytes) return 3;  // the file to load from
        std::rewind(file);
        CHECK(cudaMemcpyAsync(dev, host, bytes, cudaMemcpyHostToDevice, s));
        size_t loaded = std::fread(host, 1, bytes, file);  // refills the source of the copy in flight
        CHECK(cudaStreamSynchronize(s));
        std::printf("fread loaded %zu of %zu bytes\n", loaded, bytes);
        ground_truth("race", "cudaMemcpyAsync HtoD reads the pinned buffer while fread writes it: write-after-read");
    } else {
        write_kernel<<<256, 256, 0, s>>>(dev, N, 3.f);
        CHECK(cudaMemcpyAsync(host, dev, bytes, cudaMemcpyDeviceToHost, s));
        if (synced) CHECK(cudaStreamSynchronize(s));
        size_t written = std::fwrite(host, 1, bytes, file);
        CHECK(cudaStreamSynchronize(s));
        std::printf("fwrite wrote %zu of %zu bytes\n", written, bytes);
        if (synced) {
            ground_truth("clean", "fwrite of the pinned buffer after cudaStreamSynchronize");
        } else {
            ground_truth("race", "cudaMemcpyAsync DtoH writes the pinned buffer while fwrite reads it: read-after-write");
        }
    }
    std::fclose(file);
    std::remove(path);
    return 0;
}
