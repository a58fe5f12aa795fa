/* hl_heap_options -- h.options in Python, h:options() in Lua -- is "the
 * effective options": what the heap runs with.  reserve_bytes is the
 * reservation the heap got, which is less than asked under RLIMIT_AS (cut
 * to half the room, halved while the kernel refuses) or when the ask is no
 * whole number of pages; young_min_bytes is at most young_bytes (the nursery
 * clamps it, gc/cycle.c).  Before session 31 both said what was asked: a
 * heap made with reserve_bytes=64g under an 8 GiB RLIMIT_AS reported 64 GiB
 * while stats and range said 4 GiB.  RLIMIT_AS is set in a child. */
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

/* the effective reserve_bytes and the reservation of a heap of 64 GiB asked
 * (in under_as_limit's child); {0, 0} when creation failed */
static void ask_64_gib(uint64_t got[2]) {
  hl_options o;
  hl_options_defaults(&o);
  o.reserve_bytes = (int64_t)64 << 30;
  hl_heap *h = NULL;
  char err[512];
  if (hl_heap_new(&o, &h, err, sizeof err) == HL_OK) {
    hl_options e;
    hl_stats s;
    if (hl_heap_options(h, &e) == HL_OK && hl_stats_get(h, &s) == HL_OK) {
      got[0] = (uint64_t)e.reserve_bytes;
      got[1] = s.reserved_bytes;
    }
  }
}
static void under_limit(uint64_t limit, uint64_t out[2]) { under_as_limit(limit, ask_64_gib, out, 2); }

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  puts("SKIP: a sanitizer's shadow memory needs more address space than RLIMIT_AS leaves");
  return 77;
#endif
  uint64_t got[2];
  under_limit(8ull << 30, got);
  CHECK(got[1] > 0 && got[1] < (8ull << 30), "under 8 GiB a heap of 64 GiB asked reserved %" PRIu64,
        got[1]);
  CHECK(got[0] == got[1], "under 8 GiB: effective reserve_bytes %" PRIu64 ", reserved %" PRIu64,
        got[0], got[1]);

  /* an ask that is no whole number of pages: the pages it holds */
  hl_heap *h = HEAP("reserve_bytes=4194305", "page_size=64k");
  hl_options e;
  hl_stats s;
  OK(h, hl_heap_options(h, &e));
  OK(h, hl_stats_get(h, &s));
  CHECK(e.reserve_bytes == 4 << 20 && s.reserved_bytes == 4u << 20,
        "4 MiB + 1 asked: effective %" PRId64 ", reserved %" PRIu64, e.reserve_bytes,
        s.reserved_bytes);
  hl_heap_free(h);

  /* young_min_bytes above young_bytes: the nursery's bound is young_bytes */
  h = HEAP("generational=true", "young_bytes=64k");
  OK(h, hl_heap_options(h, &e));
  CHECK(e.young_min_bytes == 65536 && e.young_bytes == 65536,
        "young_bytes=64k: effective young_min_bytes %" PRId64, e.young_min_bytes);
  /* and the effective options make the same heap again */
  char err[256];
  CHECK(hl_options_validate(&e, err, sizeof err) == HL_OK, "effective options refused: %s", err);
  hl_heap_free(h);

  /* what was asked and got stays as given */
  h = HEAP("reserve_bytes=64m");
  OK(h, hl_heap_options(h, &e));
  CHECK(e.reserve_bytes == 64 << 20 && e.young_min_bytes == 4 << 20, "64 MiB: %" PRId64,
        e.reserve_bytes);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
