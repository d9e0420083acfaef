// What the host watch's I/O interposers (capture/src/host_watch/io_calls.rs) cost a program that guards nothing:
// 2,000,000 write(2) calls of 64 bytes to /dev/null, then as many fwrite calls, timed in the program.
//   cc -O2 -o /tmp/io_interposers benches/io_interposers.c
//   /tmp/io_interposers; LD_PRELOAD=target/release/libstreamtrace_capture.so /tmp/io_interposers
#include <fcntl.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static double seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(void) {
    enum { CALLS = 2000000 };
    char buffer[64] = {0};
    int fd = open("/dev/null", O_WRONLY);
    FILE* file = fopen("/dev/null", "wb");
    if (fd < 0 || !file) return 1;
    double start = seconds();
    for (int i = 0; i < CALLS; i++) write(fd, buffer, sizeof buffer);
    double writes = seconds() - start;
    start = seconds();
    for (int i = 0; i < CALLS; i++) fwrite(buffer, 1, sizeof buffer, file);
    double fwrites = seconds() - start;
    printf("write %.1f ns a call, fwrite %.1f ns a call\n", writes / CALLS * 1e9, fwrites / CALLS * 1e9);
    return 0;
}
