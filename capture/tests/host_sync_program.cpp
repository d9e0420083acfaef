// A program that makes every call the capture library interposes (capture/src/host_sync/), with no CUDA:
// capture/tests/host_sync.rs runs it with and without the library in LD_PRELOAD, as `streamtrace capture` puts
// it there, and the two runs must print the same, exit the same and die of the same signal. It hands values
// between threads through each kind of synchronization (a wrong order would print a wrong sum), cancels a
// thread blocked in a condition variable wait (a cancellation unwinds through the interposer), ends a thread
// with pthread_exit, forks and waits for the child (which locks what the parent held across the fork), runs a
// shell, throws through pthread_once, and hands values on through C++20's latch, semaphore, barrier and
// atomic waits (futexes made through the C library's syscall). `program exit N` exits with N; `program signal` dies of SIGTERM.
#include <pthread.h>
#include <linux/futex.h>
#include <semaphore.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <barrier>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <latch>
#include <mutex>
#include <semaphore>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

// Threads handing a counter on through a mutex and a condition variable, each waiting for its turn.
long pass_through_condition_variable(int threads, int rounds) {
  std::mutex lock;
  std::condition_variable turn;
  int next = 0;
  long total = 0;
  std::vector<std::thread> workers;
  for (int id = 0; id < threads; ++id) {
    workers.emplace_back([&, id] {
      for (int round = 0; round < rounds; ++round) {
        std::unique_lock<std::mutex> held(lock);
        turn.wait(held, [&] { return next == id; });
        total += id + 1;
        next = (next + 1) % threads;
        turn.notify_all();
      }
    });
  }
  for (auto& worker : workers) worker.join();
  return total;
}

// Readers and writers of one value through std::shared_mutex (pthread rwlocks) and a timed mutex.
long shared_and_timed(int threads) {
  std::shared_mutex rw;
  std::timed_mutex timed;
  long value = 0, seen = 0;
  std::vector<std::thread> workers;
  for (int id = 0; id < threads; ++id) {
    workers.emplace_back([&, id] {
      for (int i = 0; i < 200; ++i) {
        if (i % 4 == 0) {
          std::unique_lock<std::shared_mutex> writing(rw);
          value += 1;
        } else {
          std::shared_lock<std::shared_mutex> reading(rw);
          if (value < 0) std::abort();
        }
        if (timed.try_lock_for(std::chrono::milliseconds(100))) {
          seen += 1;
          timed.unlock();
        }
      }
      (void)id;
    });
  }
  for (auto& worker : workers) worker.join();
  return value * 1000 + seen;
}

// A producer and a consumer through a POSIX semaphore pair, and a spin lock around a sum.
long semaphores_and_spin() {
  sem_t filled, emptied;
  sem_init(&filled, 0, 0);
  sem_init(&emptied, 0, 1);
  pthread_spinlock_t spin;
  pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
  long slot = 0, sum = 0;
  std::thread producer([&] {
    for (long i = 1; i <= 500; ++i) {
      while (sem_wait(&emptied) != 0) {
      }
      slot = i;
      sem_post(&filled);
    }
  });
  std::thread consumer([&] {
    for (int i = 0; i < 500; ++i) {
      if (i % 2 == 0) {
        while (sem_wait(&filled) != 0) {
        }
      } else {
        timespec until{};
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 5;
        while (sem_timedwait(&filled, &until) != 0) {
        }
      }
      pthread_spin_lock(&spin);
      sum += slot;
      pthread_spin_unlock(&spin);
      sem_post(&emptied);
    }
  });
  producer.join();
  consumer.join();
  if (sem_trywait(&filled) == 0) std::abort();
  sem_destroy(&filled);
  sem_destroy(&emptied);
  pthread_spin_destroy(&spin);
  return sum;
}

// Threads meeting at a barrier in rounds, each adding its part in its round.
long barrier_rounds(int threads) {
  pthread_barrier_t barrier;
  pthread_barrier_init(&barrier, nullptr, threads);
  std::vector<long> parts(threads, 0);
  long checked = 0;
  std::vector<std::thread> workers;
  for (int id = 0; id < threads; ++id) {
    workers.emplace_back([&, id] {
      for (int round = 1; round <= 20; ++round) {
        parts[id] = round * (id + 1);
        if (pthread_barrier_wait(&barrier) == PTHREAD_BARRIER_SERIAL_THREAD) {
          for (long part : parts) checked += part;
        }
        pthread_barrier_wait(&barrier);
      }
    });
  }
  for (auto& worker : workers) worker.join();
  pthread_barrier_destroy(&barrier);
  return checked;
}

// std::call_once (pthread_once in libstdc++) whose first attempt throws through it.
int once_with_a_throw() {
  static std::once_flag flag;
  int calls = 0;
  try {
    std::call_once(flag, [&] {
      ++calls;
      throw std::runtime_error("first attempt");
    });
  } catch (const std::runtime_error&) {
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) threads.emplace_back([&] { std::call_once(flag, [&] { ++calls; }); });
  for (auto& thread : threads) thread.join();
  return calls;
}

pthread_mutex_t cancel_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t never_signalled = PTHREAD_COND_INITIALIZER;
int cleanups = 0;

void* wait_to_be_cancelled(void*) {
  pthread_mutex_lock(&cancel_lock);
  pthread_cleanup_push([](void*) { ++cleanups; pthread_mutex_unlock(&cancel_lock); }, nullptr);
  while (true) pthread_cond_wait(&never_signalled, &cancel_lock);
  pthread_cleanup_pop(1);
  return nullptr;
}

// A futex wait made through syscall() itself, cancelled asynchronously: the unwinding goes through the capture
// library's syscall stand-in and must still run the cleanup handler and the destructor below it.
int futex_word = 0;
std::atomic<int> futex_waiting{0}, futex_cleanups{0}, futex_destructors{0};

struct CountsItsDestruction {
  ~CountsItsDestruction() { ++futex_destructors; }
};

void* wait_on_a_futex_to_be_cancelled(void*) {
  CountsItsDestruction guard;
  pthread_cleanup_push([](void*) { ++futex_cleanups; }, nullptr);
  pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, nullptr);
  futex_waiting = 1;
  // Through a pointer without glibc's noexcept: the cancellation unwinds out of this call.
  long (*volatile system_call)(long, ...) = syscall;
  while (true) system_call(SYS_futex, &futex_word, FUTEX_WAIT_PRIVATE, 0, nullptr, nullptr, 0);
  pthread_cleanup_pop(0);
  return nullptr;
}

void* exit_early(void* value) {
  pthread_exit(value);
  return nullptr;
}

// A thread cancelled inside a condition variable wait, one ended by pthread_exit, one cancelled inside a futex
// wait, and their joins.
std::string cancel_and_exit() {
  pthread_t waiter, leaver;
  pthread_create(&waiter, nullptr, wait_to_be_cancelled, nullptr);
  usleep(20000);
  pthread_cancel(waiter);
  void* result = nullptr;
  pthread_join(waiter, &result);
  pthread_create(&leaver, nullptr, exit_early, reinterpret_cast<void*>(42));
  void* left = nullptr;
  pthread_join(leaver, &left);
  pthread_mutex_lock(&cancel_lock);  // the cleanup handler unlocked it
  pthread_mutex_unlock(&cancel_lock);
  pthread_t futex_waiter;
  pthread_create(&futex_waiter, nullptr, wait_on_a_futex_to_be_cancelled, nullptr);
  while (!futex_waiting) usleep(1000);
  usleep(20000);
  pthread_cancel(futex_waiter);
  void* futex_result = nullptr;
  pthread_join(futex_waiter, &futex_result);
  return std::string(result == PTHREAD_CANCELED ? "cancelled" : "not cancelled") + ", cleanups " +
         std::to_string(cleanups) + ", exit value " + std::to_string(reinterpret_cast<long>(left)) +
         "; futex waiter " + (futex_result == PTHREAD_CANCELED ? "cancelled" : "not cancelled") + ", cleanups " +
         std::to_string(futex_cleanups.load()) + ", destructors " + std::to_string(futex_destructors.load());
}

// A fork while another thread keeps locking: the child locks the same mutex, starts and joins a thread, and
// exits with a status.
int fork_while_locking() {
  std::mutex lock;
  long counter = 0;
  bool stop = false;
  std::thread busy([&] {
    while (true) {
      std::lock_guard<std::mutex> held(lock);
      if (stop) break;
      ++counter;
    }
  });
  usleep(5000);
  // Held by the forking thread across the fork, so that the child finds it held by itself.
  lock.lock();
  pid_t child = fork();
  if (child == 0) {
    lock.unlock();
    {
      std::lock_guard<std::mutex> held(lock);
    }
    std::thread inner([] { std::mutex m; std::lock_guard<std::mutex> g(m); });
    inner.join();
    _exit(7);
  }
  lock.unlock();
  int status = 0;
  waitpid(child, &status, 0);
  {
    std::lock_guard<std::mutex> held(lock);
    stop = true;
  }
  busy.join();
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Futures handed between threads, each getter asleep before its value is set (the wait and the wake go through
// libstdc++'s futex functions), one with a deadline, and std::async's.
long futures(int rounds) {
  long sum = 0;
  for (int round = 0; round < rounds; ++round) {
    std::promise<long> promise;
    std::future<long> value = promise.get_future();
    std::thread setter([&promise, round] {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      promise.set_value(round * 3);
    });
    if (round % 2 == 0) {
      sum += value.get();
    } else {
      while (value.wait_for(std::chrono::microseconds(300)) != std::future_status::ready) {
      }
      sum += value.get();
    }
    setter.join();
  }
  auto later = std::async(std::launch::async, [] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return 1000L;
  });
  return sum + later.get();
}

// C++20's waits, each waiter asleep before its value comes (libstdc++ sleeps on futexes through syscall): a
// latch counted down by several threads, a semaphore handing turns back and forth, a barrier's phases, and an
// int's atomic wait and notify.
long cpp20_waits(int rounds) {
  long sum = 0;
  for (int round = 0; round < rounds; ++round) {
    std::latch ready(3);
    long parts[3] = {};
    std::vector<std::thread> counters;
    for (int id = 0; id < 3; ++id) {
      counters.emplace_back([&, id] {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        parts[id] = round + id;
        ready.count_down();
      });
    }
    ready.wait();
    sum += parts[0] + parts[1] + parts[2];
    for (auto& counter : counters) counter.join();
  }
  std::binary_semaphore to_worker(0), to_main(0);
  long token = 0;
  std::thread worker([&] {
    for (int round = 0; round < rounds; ++round) {
      to_worker.acquire();
      token += 10;
      to_main.release();
    }
  });
  for (int round = 0; round < rounds; ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    token += 1;
    to_worker.release();
    to_main.acquire();
  }
  worker.join();
  sum += token;
  long phases = 0;
  std::barrier step(2, [&]() noexcept { phases += 1; });
  std::thread partner([&] {
    for (int round = 0; round < rounds; ++round) step.arrive_and_wait();
  });
  for (int round = 0; round < rounds; ++round) {
    std::this_thread::sleep_for(std::chrono::microseconds(300));
    step.arrive_and_wait();
  }
  partner.join();
  sum += phases * 100;
  std::atomic<int> flag{0};
  long handed = 0;
  std::thread waiter([&] {
    flag.wait(0);
    handed += 5000;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(2));
  flag.store(1);
  flag.notify_one();
  waiter.join();
  return sum + handed;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IONBF, 0);
  std::printf("condition variable: %ld\n", pass_through_condition_variable(4, 250));
  std::printf("shared and timed: %ld\n", shared_and_timed(4));
  std::printf("semaphores and spin: %ld\n", semaphores_and_spin());
  std::printf("barrier: %ld\n", barrier_rounds(4));
  std::printf("call_once calls: %d\n", once_with_a_throw());
  std::printf("futures: %ld\n", futures(10));
  std::printf("C++20 waits: %ld\n", cpp20_waits(10));
  std::printf("threads: %s\n", cancel_and_exit().c_str());
  std::printf("forked child: %d\n", fork_while_locking());
  std::fflush(stdout);
  int shell = std::system("echo shell: $((6 * 7))");
  std::printf("shell status: %d\n", WEXITSTATUS(shell));
  if (argc > 2 && std::strcmp(argv[1], "exit") == 0) return std::atoi(argv[2]);
  if (argc > 1 && std::strcmp(argv[1], "signal") == 0) raise(SIGTERM);
  return 0;
}
