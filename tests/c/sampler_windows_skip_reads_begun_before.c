/* A sampler's "after the mark" window (and a reset's phase) counts only the
 * readings begun after the mark: the sampling thread's read of
 * smaps_rollup (1-2 ms with 100 MiB mapped) that began before a mark and
 * was stored after it counted as "after the mark", and with a fill between
 * the two it was the lowest footprint after the mark -- 4.5-8.3 MiB below
 * anything after it in 3 of 40 runs of a 96 MiB fill (the measurement
 * hunt, twenty-second session).  An experiment asserting on the lowest
 * footprint after an event read a stale figure.
 *
 * The test is the reading's end: it defines close() and holds the sampling
 * thread's close of smaps_rollup -- its figures read -- while this thread
 * writes 64 MiB, then marks (or resets); then it lets the old reading go in
 * and waits until the thread has taken one more.  Nothing is freed after
 * the mark: the lowest after it must be at least the mark's own reading.
 * (Not under the sanitizers, whose runtimes intercept close.) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static pid_t main_tid;
static atomic_int gate, sampler_closes;
static sem_t inside, go;

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
int close(int fd) {
  if (gettid() != main_tid) {
    if (atomic_exchange(&gate, 0)) {
      sem_post(&inside);
      sem_wait_for(&go, 20);
    }
    atomic_fetch_add(&sampler_closes, 1);
  }
  return (int)syscall(SYS_close, fd);
}
#endif

static void wait_until(atomic_int *v, int at_least, const char *what) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (atomic_load(v) < at_least) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    CHECK(t.tv_sec - t0.tv_sec < 20, "%s: waited 20 s", what);
    usleep(200);
  }
}

static void scenario(bool reset) {
  hl_sampler *s;
  CHECK(hl_sampler_open(&s, 0.001, 4096) == HL_OK, "hl_sampler_open: %s", hl_heap_error(NULL));
  wait_until(&sampler_closes, atomic_load(&sampler_closes) + 2, "the sampler's first readings");
  atomic_store(&gate, 1);
  CHECK(sem_wait_for(&inside, 20), "the sampler's thread never read the footprint");
  /* its reading is taken: the footprint grows by 64 MiB after it */
  size_t n = 64u << 20;
  char *b = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(b != MAP_FAILED, "mmap");
  memset(b, 1, n);
  CHECK((reset ? hl_sampler_reset(s) : hl_sampler_mark(s)) == HL_OK, "mark/reset");
  hl_sampler_summary at;
  CHECK(hl_sampler_summary_get(s, &at) == HL_OK, "summary");
  int closes = atomic_load(&sampler_closes);
  sem_post(&go); /* the old reading goes in */
  wait_until(&sampler_closes, closes + 2, "the sampler's next reading");
  hl_sampler_summary after;
  CHECK(hl_sampler_summary_get(s, &after) == HL_OK, "summary");
  uint64_t floor = reset ? at.min_phys : at.min_phys_after_mark;
  uint64_t low = reset ? after.min_phys : after.min_phys_after_mark;
  CHECK(floor > 0 && low + (8u << 20) >= floor,
        "%s: the lowest footprint after it is %.1f MiB, %.1f MiB below the %s's own reading "
        "(nothing was freed): a reading begun before it counted",
        reset ? "reset" : "mark", low / MiB, (floor - low) / MiB, reset ? "reset" : "mark");
  hl_sampler_stop(s);
  munmap(b, n);
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 77; /* skipped */
#endif
  main_tid = gettid();
  sem_init(&inside, 0, 0);
  sem_init(&go, 0, 0);
  scenario(false);
  scenario(true);
  puts("ok");
  return 0;
}
