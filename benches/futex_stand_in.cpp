// What the `syscall` stand-in (capture/src/host_sync/interpose/futex.rs) costs a program that records nothing
// (benches/futex_stand_in.sh): another system call through syscall(), a futex wake nobody waits for (the
// program's own call: the body's release), and a C++20 binary_semaphore handed back and forth between two
// threads (each turn a wake and, mostly, a wait that slept), timed in a loop.
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <semaphore>
#include <thread>

namespace {

template <typename Loop>
void time_each(const char* name, long n, Loop loop) {
  loop(n / 10);
  auto start = std::chrono::steady_clock::now();
  loop(n);
  auto end = std::chrono::steady_clock::now();
  std::printf("%s: %.1f ns each\n", name, std::chrono::duration<double, std::nano>(end - start).count() / n);
}

}  // namespace

int main() {
  long sink = 0;
  time_each("syscall(getppid)", 2000000, [&](long n) {
    for (long i = 0; i < n; ++i) sink += syscall(SYS_getppid);
  });
  static int word = 0;
  time_each("futex wake, no waiter", 2000000, [&](long n) {
    for (long i = 0; i < n; ++i) sink += syscall(SYS_futex, &word, FUTEX_WAKE_PRIVATE, 1, nullptr, nullptr, 0);
  });
  time_each("semaphore turn, two threads", 100000, [&](long n) {
    std::binary_semaphore to_partner(0), back(0);
    std::thread partner([&] {
      for (long i = 0; i < n; ++i) {
        to_partner.acquire();
        back.release();
      }
    });
    for (long i = 0; i < n; ++i) {
      to_partner.release();
      back.acquire();
    }
    partner.join();
  });
  return sink == 42 ? 1 : 0;
}
