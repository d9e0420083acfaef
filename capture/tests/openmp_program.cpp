// Every OpenMP construct whose libgomp entry point the capture library stands in front of, each printing a
// result that a wrong hand-over or a broken call would change: parallel regions (plain, nested, combined with a
// loop of each schedule, with sections), barriers, the end of a worksharing loop, `single copyprivate`,
// `critical` (unnamed and named), `atomic` on a type without a lock-free form, and the omp_*_lock functions.
// tests/host_sync.rs runs it with and without the library preloaded: it must print the same.
#include <omp.h>
#include <cstdio>

static long neighbours(int threads) {
  long slots[64] = {};
  long sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
  {
    const int t = omp_get_thread_num();
    for (int round = 1; round <= 50; ++round) {
      slots[t] = round * (t + 1);
#pragma omp barrier
      sum += slots[(t + 1) % omp_get_num_threads()];
#pragma omp barrier
    }
  }
  return sum;
}

static long loops(int threads) {
  long dynamic = 0, guided = 0, runtime = 0, fixed = 0;
#pragma omp parallel for num_threads(threads) schedule(dynamic, 3) reduction(+ : dynamic)
  for (long i = 0; i < 1000; ++i) dynamic += i;
#pragma omp parallel for num_threads(threads) schedule(guided) reduction(+ : guided)
  for (long i = 0; i < 1000; ++i) guided += 2 * i;
#pragma omp parallel for num_threads(threads) schedule(runtime) reduction(+ : runtime)
  for (long i = 0; i < 1000; ++i) runtime += 3 * i;
  long shared[1000];
#pragma omp parallel num_threads(threads)
  {
#pragma omp for schedule(dynamic)
    for (long i = 0; i < 1000; ++i) shared[i] = i;
    // The loop's end is a barrier: every element is written before any is read here.
#pragma omp for schedule(static) reduction(+ : fixed)
    for (long i = 0; i < 1000; ++i) fixed += shared[999 - i];
  }
  return dynamic + guided + runtime + fixed;
}

static long sections_and_single(int threads) {
  long a = 0, b = 0, copied = 0, seen = 0;
#pragma omp parallel sections num_threads(threads)
  {
#pragma omp section
    a = 11;
#pragma omp section
    b = 31;
  }
#pragma omp parallel num_threads(threads) reduction(+ : seen)
  {
    long value;
#pragma omp single copyprivate(value)
    value = 1000 + a + b;
    seen += value;
  }
  copied = seen / threads;
  return a + b + copied;
}

static long locks(int threads) {
  long unnamed = 0, named = 0, guarded = 0, nested = 0;
  long double atomically = 0;
  omp_lock_t lock;
  omp_nest_lock_t nest;
  omp_init_lock(&lock);
  omp_init_nest_lock(&nest);
#pragma omp parallel num_threads(threads)
  {
    for (int i = 0; i < 200; ++i) {
#pragma omp critical
      unnamed += 1;
#pragma omp critical(other)
      named += 2;
#pragma omp atomic
      atomically += 0.5L;
      omp_set_lock(&lock);
      guarded += 3;
      omp_unset_lock(&lock);
      while (!omp_test_lock(&lock)) {
      }
      guarded += 1;
      omp_unset_lock(&lock);
      omp_set_nest_lock(&nest);
      omp_set_nest_lock(&nest);
      nested += 1;
      omp_unset_nest_lock(&nest);
      omp_unset_nest_lock(&nest);
    }
  }
  omp_destroy_lock(&lock);
  omp_destroy_nest_lock(&nest);
  return unnamed + named + guarded + nested + static_cast<long>(atomically);
}

static long nested_regions() {
  omp_set_max_active_levels(2);
  long total = 0;
#pragma omp parallel num_threads(2) reduction(+ : total)
  {
    long inner_slots[3] = {};
    long inner = 0;
#pragma omp parallel num_threads(3) reduction(+ : inner)
    {
      const int t = omp_get_thread_num();
      inner_slots[t] = 10 * (t + 1) + omp_get_ancestor_thread_num(1);
#pragma omp barrier
      inner += inner_slots[(t + 1) % 3];
    }
    total += inner;
  }
  return total;
}

// A region with a task reduction: GCC starts it through GOMP_parallel_reductions, which reads the reduction's
// descriptors from the first word of the data it is handed.
static long task_reduction(int threads) {
  long sum = 0;
#pragma omp parallel num_threads(threads) reduction(task, + : sum)
  {
#pragma omp single
    for (long i = 0; i < 100; ++i) {
#pragma omp task in_reduction(+ : sum)
      sum += i;
    }
  }
  return sum;
}

int main() {
  std::printf("neighbours: %ld\n", neighbours(4));
  std::printf("loops: %ld\n", loops(4));
  std::printf("sections and single: %ld\n", sections_and_single(4));
  std::printf("locks: %ld\n", locks(4));
  std::printf("nested regions: %ld\n", nested_regions());
  std::printf("task reduction: %ld\n", task_reduction(4));
  return 0;
}
