/* hl_memory_pressure() makes the next cycle a whole mark (tenuring in both
 * modes: it untenures every page and marks everything) that sweeps major.
 * With major_sweep=never no cycle sweeps major, and the flag was cleared
 * only by a major sweep: one call made every later cycle a whole mark for
 * the rest of the heap's life -- the default collector tenured nothing
 * again (56 of 56 cycles whole marks, 0 pages tenured after the call, where
 * 47 were before), and a generational heap ran no minor cycle again (380
 * full marks, 0 minor).  The pressure is one cycle's, whatever major_sweep
 * says. */
#include <stdbool.h>

#include "check.h"

#define N 4000 /* 4000 objects of 48 bytes: about 47 pages of 4 KiB */

static void *roots[N];

static void churn(hl_heap *h, int rounds) {
  for (int r = 0; r < rounds; r++)
    for (int k = 0; k < 2000; k++) CHECK(hl_obj_new(h, 200, 0), "churn: %s", hl_heap_error(h));
}

static void run(bool generational) {
  const char *mode = generational ? "generational" : "default";
  hl_heap *h = HEAP("major_sweep=never", "page_size=4k", "gc_trigger_bytes=64k",
                    "gc_trigger_min_bytes=64k", "tenure_full_marks=3", "young_bytes=256k",
                    "young_min_bytes=64k", "verify=true",
                    generational ? "generational=true" : "generational=false");
  OK(h, hl_roots_add(h, roots, N, 0));
  hl_enter(h);
  for (int i = 0; i < N; i++) {
    roots[i] = hl_obj_new(h, 16, 3);
    CHECK(roots[i], "alloc: %s", hl_heap_error(h));
  }
  churn(h, 30);
  hl_stats s0 = stats_of(h);
  /* (a generational heap's full marks wait for the old generation to grow:
   * it has run minor cycles only so far) */
  if (!generational)
    CHECK(s0.tenured_pages >= 40, "%s: %" PRIu64 " pages tenured before the pressure", mode,
          s0.tenured_pages);
  else
    CHECK(s0.minor_cycles >= 10, "generational: %" PRIu64 " minor cycles before the pressure",
          s0.minor_cycles);

  OK(h, hl_memory_pressure(h));
  churn(h, 2);
  hl_stats s1 = stats_of(h);
  CHECK(s1.cycles > s0.cycles, "%s: no cycle after the pressure", mode);
  CHECK(s1.whole_marks > s0.whole_marks, "%s: the cycle under pressure was not a whole mark",
        mode);

  churn(h, 40);
  hl_stats s = stats_of(h);
  uint64_t cycles = s.cycles - s1.cycles, whole = s.whole_marks - s1.whole_marks;
  printf("%s: %" PRIu64 " cycles after the pressure's, %" PRIu64 " whole marks, %" PRIu64
         " minor, %" PRIu64 " pages tenured\n",
         mode, cycles, whole, s.minor_cycles - s1.minor_cycles, s.tenured_pages);
  CHECK(cycles >= 10, "%s: %" PRIu64 " cycles", mode, cycles);
  CHECK(whole < cycles, "%s: all %" PRIu64 " cycles after the pressure's were whole marks",
        mode, cycles);
  if (!generational)
    CHECK(s.tenured_pages >= 40, "%s: %" PRIu64 " pages tenured after the pressure", mode,
          s.tenured_pages);
  else
    CHECK(s.minor_cycles > s1.minor_cycles, "generational: no minor cycle after the pressure");
  CHECK(s.verify_failures == 0, "%s: verify failures %" PRIu64, mode, s.verify_failures);
  hl_leave(h);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

/* A manual heap has no cycle the pressure could steer: HL_EMODE, as
 * hl_collect -- it returned success and did nothing (the C API hunt,
 * session 33). */
static void manual_heap_has_no_pressure(void) {
  hl_options o;
  hl_options_defaults(&o);
  o.mode = HL_MODE_MANUAL;
  o.reserve_bytes = 64u << 20;
  char err[256];
  hl_heap *m = NULL;
  CHECK(hl_heap_new(&o, &m, err, sizeof err) == HL_OK, "%s", err);
  FAILS(m, HL_EMODE, "memory_pressure: a manual heap has no collector", hl_memory_pressure(m));
  FAILS(m, HL_EMODE, "collect: a manual heap has no collector", hl_collect(m, 1, -1));
  OK(m, hl_trim(m));
  hl_heap_free(m);
}

int main(void) {
  manual_heap_has_no_pressure();
  run(false);
  run(true);
  return 0;
}
