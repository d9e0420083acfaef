// VARIANT: event
// A buffer handed to another process through CUDA IPC: the parent cudaMallocs it, exports its handle and starts
// itself again as the child (a process that made CUDA calls cannot fork and go on using CUDA), passing the handle
// on the command line. The child maps it (cudaIpcOpenMemHandle), fills it with write_kernel on one non-blocking
// stream and reads it with read_kernel on another, with nothing ordering the two (race: read-after-write in the
// child, on the mapped block). "event": the reader's stream waits on an event recorded after the fill (clean).
// Then the child closes the mapping and the parent frees the buffer after the child has exited.
#include <cstring>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include "common.cuh"

static std::string hex(const cudaIpcMemHandle_t& handle) {
    std::string out;
    char byte[3];
    for (size_t i = 0; i < sizeof handle.reserved; i++) {
        std::snprintf(byte, sizeof byte, "%02x", static_cast<unsigned char>(handle.reserved[i]));
        out += byte;
    }
    return out;
}

static cudaIpcMemHandle_t unhex(const char* text) {
    cudaIpcMemHandle_t handle;
    for (size_t i = 0; i < sizeof handle.reserved; i++) {
        unsigned value = 0;
        std::sscanf(text + 2 * i, "%2x", &value);
        handle.reserved[i] = static_cast<char>(value);
    }
    return handle;
}

static int child(const char* handle_text, bool ordered) {
    float *buf, *out;
    CHECK(cudaIpcOpenMemHandle(reinterpret_cast<void**>(&buf), unhex(handle_text), cudaIpcMemLazyEnablePeerAccess));
    CHECK(cudaMalloc(&out, 256 * sizeof(float)));
    cudaStream_t a, b;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    cudaEvent_t filled;
    CHECK(cudaEventCreateWithFlags(&filled, cudaEventDisableTiming));
    write_kernel<<<256, 256, 0, a>>>(buf, N, 1.f);
    if (ordered) {
        CHECK(cudaEventRecord(filled, a));
        CHECK(cudaStreamWaitEvent(b, filled, 0));
    }
    read_kernel<<<256, 256, 0, b>>>(buf, out, N);
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaIpcCloseMemHandle(buf));
    CHECK(cudaFree(out));
    if (ordered) {
        ground_truth("clean", "read_kernel on stream b waits on an event recorded after write_kernel on stream a, in the child, on the imported buffer");
    } else {
        ground_truth("race", "write_kernel on stream a and read_kernel on stream b, in the child, on the buffer imported through CUDA IPC: read-after-write");
    }
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 2 && std::strcmp(argv[1], "child") == 0) {
        return child(argv[2], argc > 3 && std::strcmp(argv[3], "event") == 0);
    }
    const bool ordered = argc > 1 && std::strcmp(argv[1], "event") == 0;
    float* buf;
    CHECK(cudaMalloc(&buf, N * sizeof(float)));
    cudaIpcMemHandle_t handle;
    CHECK(cudaIpcGetMemHandle(&handle, buf));
    const std::string text = hex(handle);
    std::fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        const char* args[] = {argv[0], "child", text.c_str(), ordered ? "event" : "none", nullptr};
        execv("/proc/self/exe", const_cast<char* const*>(args));
        std::_Exit(127);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        std::fprintf(stderr, "the child failed (status %d)\n", status);
        return 1;
    }
    CHECK(cudaFree(buf));
    return 0;
}
