// A library with an OpenMP region of its own, built by tests/host_sync.rs against two copies of libgomp (as two
// Python extensions' wheels each carry one) and loaded by openmp_loader.cpp outside the global scope. Each
// thread of the team writes its number into its own slot: run on another copy's team, its own runtime's
// omp_get_thread_num would say 0 on every thread and the count would come out wrong. Built with
// -DIN_CONSTRUCTOR it also runs a region with a barrier in its constructor, while dlopen holds the loader's lock.
// inside_a_region runs another library's region inside one of its own.
#include <omp.h>

extern "C" int team_numbers(int threads) {
  int slots[64] = {};
  int team = 0;
#pragma omp parallel num_threads(threads)
  {
    slots[omp_get_thread_num()] = omp_get_thread_num() + 1;
#pragma omp barrier
#pragma omp single
    team = omp_get_num_threads();
  }
  int sum = 0;
  for (int t = 0; t < 64; ++t) sum += slots[t];
  return sum * 100 + team;
}

// Calls `inner` on thread 0 of a region of its own: a region of another library, on another copy of libgomp,
// nested in this one's (that copy starts a team of its own for it).
extern "C" int inside_a_region(int (*inner)(int)) {
  int result = 0;
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0) result = inner(3);
  }
  return result;
}

#ifdef IN_CONSTRUCTOR
static int at_load = 0;
__attribute__((constructor)) static void count_at_load() { at_load = team_numbers(2); }
extern "C" int counted_at_load() { return at_load; }
#endif
