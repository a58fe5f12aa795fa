/* Mutator threads allocating and dropping against the background collector
 * (collector=background) for a few seconds: no lost object (every slot's
 * payload is checked, during the run and at the end), no deadlock, and the
 * collector really ran cycles concurrently.  Twice: with the default
 * collector, then generational (minor cycles on the collector thread, the
 * write barrier in the mutators' hl_ref_set, the verifier checking between
 * mark and sweep that no old object hides a young one).  Built and run under
 * ThreadSanitizer too (suite 'threads'). */
#include <pthread.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define THREADS 4
#define SLOTS 256

static hl_heap *h;
static double seconds = 2.0;
static bool generational;

/* The checks below want the collector thread to have run at least 3 cycles
 * (and, generational, 3 minor ones).  A loaded machine (the tests of other
 * suites beside this one, ThreadSanitizer) may give it fewer in `seconds`:
 * the mutators then run on until it has, for at most 20 s more, rather than
 * fail a test of correctness for lack of CPU (a 1 s run at load 12 under
 * TSan saw 2 wake-ups). */
static bool collector_has_run_enough(void) {
  hl_stats s = stats_of(h);
  return s.collector_wakeups >= 3 && (!generational || s.minor_cycles >= 3);
}

static void pattern(unsigned char *buf, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; i++) buf[i] = (unsigned char)(seed * 31 + i * 7);
}

static void *mutator(void *arg) {
  uint64_t t = (uint64_t)(uintptr_t)arg;
  hl_ref root;
  OK(h, hl_alloc(h, 0, SLOTS, &root));
  uint64_t last[SLOTS] = {0};
  unsigned char buf[512], got[512];
  double end = now_s() + seconds, cap = end + 20.0;
  uint64_t i = 0;
  for (;;) {
    double t_now = now_s();
    if (t_now >= cap || (t_now >= end && collector_has_run_enough())) break;
    for (int k = 0; k < 256; k++, i++) {
      uint64_t size = 8 + (i * 13 + t) % 400;
      uint64_t seed = t << 40 | i;
      hl_ref o;
      OK(h, hl_alloc(h, size, 1, &o));
      pattern(buf, size, seed);
      OK(h, hl_ref_write(h, o, 0, buf, size));
      OK(h, hl_ref_set(h, root, i % SLOTS, o));
      OK(h, hl_ref_release(h, o));
      last[i % SLOTS] = seed;
      /* garbage that is never rooted beyond this call */
      hl_ref g;
      OK(h, hl_alloc(h, 100, 0, &g));
      OK(h, hl_ref_release(h, g));
    }
    if (t == 0 && i % 4096 == 0) {
      hl_ref f;
      OK(h, hl_fill(h, 2u << 20, 64, 0, &f)); /* bulk: pages empty and get trimmed */
      OK(h, hl_ref_release(h, f));
      OK(h, hl_collect(h, 1, -1));            /* explicit cycles race background ones */
    }
    /* spot-check a slot written earlier */
    uint64_t s = (i * 7) % SLOTS;
    if (last[s]) {
      hl_ref o;
      OK(h, hl_ref_get(h, root, s, &o));
      CHECK(o, "thread %" PRIu64 ": slot %" PRIu64 " lost its object", t, s);
      hl_object_info info;
      OK(h, hl_ref_info(h, o, &info));
      OK(h, hl_ref_read(h, o, 0, got, info.size));
      pattern(buf, info.size, last[s]);
      CHECK(memcmp(buf, got, info.size) == 0, "thread %" PRIu64 ": slot %" PRIu64 " corrupted", t, s);
      OK(h, hl_ref_release(h, o));
    }
  }
  for (uint64_t s = 0; s < SLOTS; s++) {
    hl_ref o;
    OK(h, hl_ref_get(h, root, s, &o));
    CHECK(o, "final: slot lost");
    hl_object_info info;
    OK(h, hl_ref_info(h, o, &info));
    OK(h, hl_ref_read(h, o, 0, got, info.size));
    pattern(buf, info.size, last[s]);
    CHECK(memcmp(buf, got, info.size) == 0, "final: slot %" PRIu64 " corrupted", s);
    OK(h, hl_ref_release(h, o));
  }
  OK(h, hl_ref_release(h, root));
  return NULL;
}

static void run(const char *mode, const char *young) {
  generational = strcmp(mode, "generational=true") == 0;
  h = HEAP("collector=background", "gc_trigger_bytes=1m", "gc_trigger_min_bytes=256k",
           "warm_pages=4", "verify=true", mode, young);
  pthread_t th[THREADS];
  for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, mutator, (void *)t);
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  hl_stats s = stats_of(h);
  printf("%s: %.1f s, %d threads: %" PRIu64 " cycles (%" PRIu64 " minor, %" PRIu64
         " collector wake-ups), %" PRIu64 " objects, %" PRIu64 " pages released, %" PRIu64
         " reused\n", mode, seconds, THREADS, s.cycles, s.minor_cycles, s.collector_wakeups,
         s.objects_allocated, s.released_pages, s.reused_pages);
  CHECK(s.collector_wakeups >= 3, "the background collector ran %" PRIu64 " cycles",
        s.collector_wakeups);
  CHECK(s.verify_failures == 0, "verify failed: %s", hl_heap_error(h));
  if (strcmp(mode, "generational=true") == 0)
    CHECK(s.minor_cycles >= 3, "minor cycles %" PRIu64, s.minor_cycles);
  OK(h, hl_collect(h, 2, 1));
  hl_stats e = stats_of(h);
  CHECK(e.handles == 0 && e.small_live_bytes == 0, "leftover: %" PRIu64 " handles, %" PRIu64 " bytes",
        e.handles, e.small_live_bytes);
  check_invariants(h);
  hl_heap_free(h); /* stops the collector thread */
}

int main(int argc, char **argv) {
  if (argc > 1) seconds = atof(argv[1]);
  seconds /= 2;
  run("generational=false", "young_bytes=32m");
  run("generational=true", "young_bytes=256k");
  return 0;
}
