// The shape of a two-GPU NCCL program's exit, without torch (capture/tests/observer_exit.rs builds and runs
// this): callbacks that use the native observer's state (observer_lifetime.h, the code torch_observer.cpp uses)
// keep firing while the process exits. Worker threads call them in a loop through exit (as c10d's watchdog
// and NCCL's threads do while the main thread runs static destructors); each thread's own thread-local, made
// before the observer's state, calls them while it is destroyed (as torch frees tensors held by thread-locals);
// a static made before the observer's state calls them from its destructor (as libtorch's allocator does at
// exit). Several processes do it at once. Every process must exit 0.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "../python/observer_lifetime.h"

namespace {

struct ThreadState {
  std::string text;  // what an op's record is built in
  std::unordered_map<const void*, int> facts;
};

struct Shared {
  std::mutex lock;
  std::unordered_map<unsigned long, unsigned long> live;  // the observer's table of allocator blocks
  unsigned long next = 1;
};

std::atomic<unsigned long> ignored{0};

// What a RecordFunction or allocator callback does with the observer's state.
void callback(unsigned long key) {
  ThreadState* thread = streamtrace_observer::this_thread<ThreadState>();
  if (thread == nullptr) {
    ignored.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  thread->text.assign(48, 'x');
  thread->text += std::to_string(key);
  thread->facts[&thread->text] += 1;
  Shared& shared = streamtrace_observer::forever<Shared>();
  std::lock_guard<std::mutex> guard(shared.lock);
  shared.live[key % 1024] = shared.next++;
  if (shared.live.size() > 512) {
    shared.live.erase(shared.live.begin());
  }
}

// A framework's thread-local that frees its tensors (calls back) while the thread's thread-locals are destroyed.
struct FrameworkThreadLocal {
  bool made = false;
  ~FrameworkThreadLocal() {
    for (unsigned long i = 0; i < 100; ++i) {
      callback(i);
    }
  }
};
thread_local FrameworkThreadLocal framework_thread_local;

// A framework's static that frees its memory (calls back) at exit, after the statics made after it are gone.
struct FrameworkStatic {
  ~FrameworkStatic() {
    for (unsigned long i = 0; i < 100; ++i) {
      callback(i);
    }
  }
} framework_static;

[[noreturn]] void one_process() {
  callback(0);  // the observer's state is made after the framework's static
  std::atomic<bool> started{false};
  for (int t = 0; t < 8; ++t) {
    std::thread([&started, t] {
      framework_thread_local.made = true;  // made before the observer's state on this thread
      for (unsigned long i = 0;; ++i) {
        callback(i * 8 + t);
        started.store(true);
      }
    }).detach();
  }
  std::vector<std::thread> short_lived;
  for (int t = 0; t < 8; ++t) {
    short_lived.emplace_back([t] {
      framework_thread_local.made = true;
      for (unsigned long i = 0; i < 10000; ++i) {
        callback(i * 16 + t);
      }
    });
  }
  for (auto& thread : short_lived) {
    thread.join();
  }
  while (!started.load()) {
  }
  framework_thread_local.made = true;
  std::exit(0);  // the detached threads keep calling back through the exit
}

}  // namespace

int main(int argc, char** argv) {
  int processes = argc > 1 ? std::atoi(argv[1]) : 8;
  std::vector<pid_t> children;
  for (int p = 0; p < processes; ++p) {
    pid_t child = fork();
    if (child == 0) {
      one_process();
    }
    children.push_back(child);
  }
  int clean = 0;
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      ++clean;
    } else if (WIFSIGNALED(status)) {
      std::printf("process %d died of signal %d\n", static_cast<int>(child), WTERMSIG(status));
    } else {
      std::printf("process %d exited %d\n", static_cast<int>(child), WEXITSTATUS(status));
    }
  }
  std::printf("%d of %d processes exited cleanly\n", clean, processes);
  return clean == processes ? 0 : 1;
}
