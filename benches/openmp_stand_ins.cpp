// What the OpenMP stand-ins cost a program that records nothing (benches/openmp_stand_ins.sh): a lock and unlock
// of an omp_lock_t, the same on two threads of a team at once (each its own lock), and an empty parallel region
// of two threads, timed in a loop. Built as a library and loaded by
// the same file built as a program (OPENMP_LOADER), with RTLD_LOCAL (libgomp outside the global scope, as a
// Python extension's) or RTLD_GLOBAL.
#ifdef OPENMP_LOADER
#include <dlfcn.h>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <initializer_list>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  const int scope = std::strcmp(argv[2], "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL;
  void* library = dlopen(argv[1], RTLD_NOW | scope);
  if (!library) return std::printf("%s\n", dlerror()), 1;
  for (const char* name : {"lock_pairs", "team_lock_pairs", "empty_regions"}) {
    auto loop = reinterpret_cast<long (*)(long)>(dlsym(library, name));
    const long n = name[0] == 'e' ? 20000 : 2000000;
    loop(n / 10);
    auto start = std::chrono::steady_clock::now();
    loop(n);
    auto end = std::chrono::steady_clock::now();
    std::printf("%s %s: %.1f ns each\n", argv[2], name, std::chrono::duration<double, std::nano>(end - start).count() / n);
  }
  return 0;
}
#else
#include <omp.h>

extern "C" long lock_pairs(long n) {
  omp_lock_t lock;
  omp_init_lock(&lock);
  long total = 0;
  for (long i = 0; i < n; ++i) {
    omp_set_lock(&lock);
    total += i & 1;
    omp_unset_lock(&lock);
  }
  omp_destroy_lock(&lock);
  return total;
}

// Two threads, each locking a lock of its own inside one region (the team's calls: no lock is shared).
extern "C" long team_lock_pairs(long n) {
  long total = 0;
#pragma omp parallel num_threads(2) reduction(+ : total)
  total += lock_pairs(n);
  return total;
}

extern "C" long empty_regions(long n) {
  long total = 0;
  for (long i = 0; i < n; ++i) {
#pragma omp parallel num_threads(2) reduction(+ : total)
    total += omp_get_thread_num();
  }
  return total;
}
#endif
