/*
 * How long one cache line takes to go from core 0 to core 1 and back, sampled
 * once a second: the cost of any data that moves between the two ranks of an
 * np=2 job on one host (the ring's copies, every negotiation round).
 *
 * On a virtual machine the hypervisor decides which physical cores, caches
 * and sockets the virtual CPUs sit on, and it moves them. The training
 * benchmark's spread on the 2-core VM this project is developed on follows
 * that (docs/training_benchmark.md): with nothing else running, this probe
 * read 180 ns in some seconds and 400-590 ns in others.
 *
 *   gcc -O2 -pthread benchmarks/cross_core_latency.c -o /tmp/cross_core_latency
 *   /tmp/cross_core_latency 30      # seconds; prints "unix-time round-trip-ns"
 *
 * Each sample takes about 5 ms of both cores, so it can run beside a
 * benchmark without changing it much.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kRoundTrips = 20000 };

/* Alone on its cache line, so only the two threads' hand-offs move it. */
static _Alignas(64) atomic_long baton;

static double now_seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pin_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* Core 1: hands each odd value back as the next even one. */
static void *answer(void *unused) {
  (void)unused;
  pin_to(1);
  for (long v = 1; v < 2 * kRoundTrips; v += 2) {
    while (atomic_load_explicit(&baton, memory_order_acquire) != v) {
    }
    atomic_store_explicit(&baton, v + 1, memory_order_release);
  }
  return NULL;
}

int main(int argc, char **argv) {
  const double seconds = argc > 1 ? atof(argv[1]) : 10.0;
  pin_to(0);
  const double end = now_seconds() + seconds;
  while (now_seconds() < end) {
    atomic_store(&baton, 0);
    pthread_t peer;
    if (pthread_create(&peer, NULL, answer, NULL) != 0) {
      perror("pthread_create");
      return 1;
    }
    const double start = now_seconds();
    for (long v = 0; v < 2 * kRoundTrips; v += 2) {
      atomic_store_explicit(&baton, v + 1, memory_order_release);
      while (atomic_load_explicit(&baton, memory_order_acquire) != v + 2) {
      }
    }
    const double took = now_seconds() - start;
    pthread_join(peer, NULL);
    printf("%.3f %.0f\n", start, took / kRoundTrips * 1e9);
    fflush(stdout);
    const struct timespec pause = {1, 0};
    nanosleep(&pause, NULL);
  }
  return 0;
}
