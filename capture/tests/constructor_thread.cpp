// A library whose constructor starts a thread and waits for it (capture/tests/host_sync.rs): the thread makes the
// process's first system call through syscall() and its first rwlock, semaphore and futex calls while the loader
// holds its lock for the dlopen that runs the constructor. An interposer that looked up the real function on its
// first call would wait for that lock in dlsym, and the constructor for the thread: a deadlock. Built with
// -DLOADER as the program that loads the library named by its argument.
#ifdef LOADER
#include <dlfcn.h>
#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  void* library = dlopen(argv[1], RTLD_NOW);
  if (!library) return std::printf("%s\n", dlerror()), 1;
  auto said = reinterpret_cast<const char* (*)()>(dlsym(library, "what_the_constructor_saw"));
  std::printf("loaded: %s\n", said());
  return 0;
}
#else
#include <linux/futex.h>
#include <pthread.h>
#include <semaphore.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

namespace {
// Constant-initialized: a dynamic initializer could run after the constructor.
const char* seen = "nothing";

__attribute__((constructor)) void start_a_thread_and_wait() {
  std::thread worker([] {
    static pthread_rwlock_t lock = PTHREAD_RWLOCK_INITIALIZER;
    static int word = 0;
    sem_t posted;
    sem_init(&posted, 0, 0);
    sem_post(&posted);
    sem_wait(&posted);
    pthread_rwlock_rdlock(&lock);
    pthread_rwlock_unlock(&lock);
    long woken = syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
    seen = syscall(SYS_gettid) > 0 && woken == 0 ? "the worker ran" : "the worker's calls failed";
  });
  worker.join();
}
}  // namespace

extern "C" const char* what_the_constructor_saw() { return seen; }
#endif
