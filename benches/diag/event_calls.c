// Diagnostic CUPTI injection (not part of capture): logs every driver call that creates, records, waits on or
// queries a CUDA event, with its thread and the thread's name, the launch attributes of cuLaunchKernelEx that
// name an event, and stream-capture calls; at exit, how many calls of each name each thread made. It answers
// "which API records the events a program waits on" independently of the capture library (one CUPTI subscriber
// per process: run it instead of capture).
//
//   gcc -O2 -shared -fPIC -I/usr/local/cuda/include event_calls.c -o event_calls.so \
//       -L/usr/local/cuda/targets/x86_64-linux/lib -lcupti -lpthread
//   CUDA_INJECTION64_PATH=$PWD/event_calls.so EVENT_CALLS_DIR=/tmp/ev program...   (one file per process)
#define _GNU_SOURCE
#include <cuda.h>
#include <cupti.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static FILE* out;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

// Per (thread, function name): calls made; at most a few thousand entries.
struct count { long tid; const char* name; long calls; char thread[16]; };
static struct count counts[8192];
static int ncounts;

// Events recorded so far by any form of record, to flag waits on events never recorded.
static uintptr_t recorded[65536];
static int nrecorded;

static int was_recorded(uintptr_t e) {
    for (int i = 0; i < nrecorded; ++i) if (recorded[i] == e) return 1;
    return 0;
}
static void note_recorded(uintptr_t e) {
    if (!was_recorded(e) && nrecorded < 65536) recorded[nrecorded++] = e;
}

static void count_call(long tid, const char* name) {
    for (int i = 0; i < ncounts; ++i)
        if (counts[i].tid == tid && strcmp(counts[i].name, name) == 0) { counts[i].calls++; return; }
    if (ncounts < 8192) {
        struct count* c = &counts[ncounts++];
        c->tid = tid; c->name = name; c->calls = 1;
        pthread_getname_np(pthread_self(), c->thread, sizeof c->thread);
    }
}

static void CUPTIAPI on_call(void* user, CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void* data) {
    (void)user; (void)cbid;
    if (domain != CUPTI_CB_DOMAIN_DRIVER_API) return;
    const CUpti_CallbackData* d = data;
    if (d->callbackSite != CUPTI_API_EXIT) return;
    const char* name = d->functionName;
    long tid = syscall(SYS_gettid);
    uintptr_t* w = (uintptr_t*)d->functionParams;
    int result = d->functionReturnValue ? *(int*)d->functionReturnValue : -1;
    char thread[16] = "";
    pthread_mutex_lock(&lock);
    count_call(tid, name);
    int evented = strstr(name, "Event") != NULL;
    if (evented || strstr(name, "Capture") || strstr(name, "Ipc")) {
        pthread_getname_np(pthread_self(), thread, sizeof thread);
        if (strncmp(name, "cuEventRecord", 13) == 0 && result == 0) note_recorded(w[0]);
        if (strcmp(name, "cuEventCreate") == 0 || strcmp(name, "cuIpcOpenEventHandle") == 0) {
            fprintf(out, "%ld %-15s %s -> event %#lx (result %d)\n", tid, thread, name, w && w[0] ? (unsigned long)*(uintptr_t*)w[0] : 0ul, result);
        } else if (strncmp(name, "cuEventQuery", 12) == 0) {
            // Queries are many: only counted (the table at exit).
        } else if (strncmp(name, "cuStreamWaitEvent", 17) == 0) {
            fprintf(out, "%ld %-15s %s stream %#lx event %#lx flags %#lx%s (result %d)\n", tid, thread, name,
                    (unsigned long)w[0], (unsigned long)w[1], (unsigned long)w[2],
                    was_recorded(w[1]) ? "" : "  <-- NEVER RECORDED SO FAR", result);
        } else {
            fprintf(out, "%ld %-15s %s %#lx %#lx (result %d)\n", tid, thread, name, (unsigned long)w[0], (unsigned long)w[1], result);
        }
    }
    if (strncmp(name, "cuLaunchKernelEx", 16) == 0 && w && w[0]) {
        const CUlaunchConfig* config = (const CUlaunchConfig*)w[0];
        for (unsigned i = 0; i < config->numAttrs && i < 64; ++i) {
            const CUlaunchAttribute* a = &config->attrs[i];
            if (a->id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT || a->id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_EVENT) {
                uintptr_t e = (uintptr_t)a->value.launchCompletionEvent.event;
                if (result == 0) note_recorded(e);
                if (!thread[0]) pthread_getname_np(pthread_self(), thread, sizeof thread);
                fprintf(out, "%ld %-15s %s stream %#lx attribute %s event %#lx flags %d\n", tid, thread, name,
                        (unsigned long)config->hStream,
                        a->id == CU_LAUNCH_ATTRIBUTE_LAUNCH_COMPLETION_EVENT ? "LAUNCH_COMPLETION_EVENT" : "PROGRAMMATIC_EVENT",
                        (unsigned long)e, a->value.launchCompletionEvent.flags);
            } else if (a->id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION && a->value.programmaticStreamSerializationAllowed) {
                fprintf(out, "%ld %-15s %s stream %#lx attribute PROGRAMMATIC_STREAM_SERIALIZATION\n", tid, thread, name, (unsigned long)config->hStream);
            }
        }
    }
    pthread_mutex_unlock(&lock);
}

static void at_exit(void) {
    pthread_mutex_lock(&lock);
    fprintf(out, "== calls per thread and function\n");
    for (int i = 0; i < ncounts; ++i)
        fprintf(out, "%ld %-15s %-40s %ld\n", counts[i].tid, counts[i].thread, counts[i].name, counts[i].calls);
    fflush(out);
    pthread_mutex_unlock(&lock);
}

int InitializeInjection(void) {
    const char* dir = getenv("EVENT_CALLS_DIR");
    char path[512];
    snprintf(path, sizeof path, "%s/events.%d.log", dir ? dir : "/tmp", (int)getpid());
    out = fopen(path, "w");
    if (!out) return 1;
    setvbuf(out, NULL, _IOLBF, 0);
    CUpti_SubscriberHandle subscriber;
    if (cuptiSubscribe(&subscriber, on_call, NULL) != CUPTI_SUCCESS) { fprintf(out, "cuptiSubscribe failed\n"); return 1; }
    cuptiEnableDomain(1, subscriber, CUPTI_CB_DOMAIN_DRIVER_API);
    atexit(at_exit);
    return 1;
}
