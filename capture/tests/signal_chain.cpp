// A program that handles its own SIGSEGV in every way libc offers and faults on purpose; tests/signal_chain.rs
// runs it plainly and with the capture library preloaded (host watch on) and requires the same output and the
// same exit status: the capture's handler must stay out of the program's way. The mode "who" instead prints
// whether the kernel's SIGSEGV handler is the one the program installed (with the capture preloaded it is not:
// the capture's stays first).
#include <csetjmp>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static sigjmp_buf jump;
static void* expected = nullptr;

static void on_siginfo(int sig, siginfo_t* info, void*) {
    std::printf("siginfo handler: signal %d, code %d, address %s\n", sig, info->si_code,
                info->si_addr == expected ? "the page" : "elsewhere");
    siglongjmp(jump, 1);
}

static void on_plain(int sig) {
    std::printf("plain handler: signal %d\n", sig);
    siglongjmp(jump, 1);
}

static void on_raise(int sig, siginfo_t* info, void*) {
    std::printf("raised: signal %d, from a fault: %s\n", sig, info->si_code > 0 ? "yes" : "no");
}

static void fault(void* page) {
    expected = page;
    if (sigsetjmp(jump, 1) == 0) {
        *static_cast<volatile int*>(page) = 1;
        std::printf("the store went through\n");
    } else {
        std::printf("back from the handler\n");
    }
}

static bool segv_blocked() {
    sigset_t now;
    pthread_sigmask(SIG_BLOCK, nullptr, &now);
    return sigismember(&now, SIGSEGV) == 1;
}

// The kernel's own record of the SIGSEGV handler, past any library.
struct KernelAction {
    void* handler;
    unsigned long flags;
    void* restorer;
    unsigned long mask;
};

int main(int argc, char** argv) {
    std::setvbuf(stdout, nullptr, _IONBF, 0);
    const char* mode = argc > 1 ? argv[1] : "all";
    void* page = mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct sigaction act {};
    act.sa_sigaction = on_siginfo;
    act.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &act, nullptr);
    if (std::strcmp(mode, "who") == 0) {
        KernelAction kernel{};
        syscall(SYS_rt_sigaction, SIGSEGV, nullptr, &kernel, 8);
        std::printf("the kernel's handler is the program's: %s\n",
                    kernel.handler == reinterpret_cast<void*>(on_siginfo) ? "yes" : "no");
        return 0;
    }
    fault(page);

    struct sigaction old {};
    sigaction(SIGSEGV, nullptr, &old);
    std::printf("asked back: the program's handler %s, SA_SIGINFO %s\n",
                old.sa_sigaction == on_siginfo ? "yes" : "no", old.sa_flags & SA_SIGINFO ? "yes" : "no");

    auto previous = signal(SIGSEGV, on_plain);
    std::printf("signal() returned the previous handler: %s\n",
                reinterpret_cast<void*>(previous) == reinterpret_cast<void*>(on_siginfo) ? "yes" : "no");
    fault(page);

    act.sa_flags = SA_SIGINFO | SA_RESETHAND;
    sigaction(SIGSEGV, &act, nullptr);
    fault(page);
    sigaction(SIGSEGV, nullptr, &old);
    std::printf("after SA_RESETHAND the handler is the default: %s\n", old.sa_handler == SIG_DFL ? "yes" : "no");

    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGSEGV);
    pthread_sigmask(SIG_BLOCK, &block, nullptr);
    std::printf("SIGSEGV blocked as asked: %s\n", segv_blocked() ? "yes" : "no");
    pthread_sigmask(SIG_UNBLOCK, &block, nullptr);
    std::printf("and unblocked: %s\n", segv_blocked() ? "no" : "yes");

    act.sa_sigaction = on_raise;
    act.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &act, nullptr);
    raise(SIGSEGV);

    signal(SIGSEGV, SIG_IGN);
    raise(SIGSEGV);
    std::printf("an ignored raise goes by\n");

    if (std::strcmp(mode, "raise-default") == 0) {
        signal(SIGSEGV, SIG_DFL);
        raise(SIGSEGV);
        std::printf("not reached\n");
        return 3;
    }
    // The default action for a real fault: the process ends by SIGSEGV.
    signal(SIGSEGV, SIG_DFL);
    std::printf("faulting with the default action\n");
    *static_cast<volatile int*>(page) = 2;
    std::printf("not reached\n");
    return 4;
}
