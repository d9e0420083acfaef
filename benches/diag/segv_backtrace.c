// Diagnostic LD_PRELOAD (not part of capture): on SIGSEGV, prints the faulting thread's id and name and its
// native backtrace, each frame as library + offset (symbolize offsets with addr2line -f -C -e LIBRARY), then dies
// of the signal as before. Python's faulthandler (PYTHONFAULTHANDLER=1) prints the Python side first.
//
//   gcc -O2 -shared -fPIC segv_backtrace.c -o segv_backtrace.so -ldl
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void on_segv(int sig, siginfo_t* info, void* context) {
    (void)context;
    void* frames[64];
    int n = backtrace(frames, 64);
    char thread[16] = "";
    pthread_getname_np(pthread_self(), thread, sizeof thread);
    fprintf(stderr, "segv_backtrace: pid %d thread %ld (%s) signal %d at address %p\n", (int)getpid(),
            (long)syscall(SYS_gettid), thread, sig, info->si_addr);
    for (int i = 0; i < n; ++i) {
        Dl_info where;
        if (dladdr(frames[i], &where) && where.dli_fname) {
            fprintf(stderr, "  #%d %s+%#lx (%s)\n", i, where.dli_fname,
                    (unsigned long)((char*)frames[i] - (char*)where.dli_fbase), where.dli_sname ? where.dli_sname : "?");
        } else {
            fprintf(stderr, "  #%d %p\n", i, frames[i]);
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = on_segv;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigaction(SIGSEGV, &action, NULL);
}
