/* A cycle run because an allocation found no memory (cycle reason 4) keeps
 * the pages it empties for that allocation: its trim used to release them
 * down to warm_pages first, so the retry had to restore one -- a madvise and
 * a refault for nothing on Linux, and ENOMEM when the restore failed (the
 * page is parked, reuse-failed), with every page of the heap just freed.
 * The next cycle's trim releases what is left beyond the warm cache.
 *
 * Found with fuzz_heap's fill-oom-that-a-retry-survives (restore failing on
 * every call, armed by the input): its memory cycle released one of the four
 * pages it had freed, and the page never came back to the fill.
 *
 * Here: 16 pages full of garbage no cycle has swept yet, warm_pages=0, every
 * restore failing; one small allocation.  Before the fix: ENOMEM ("the
 * reservation ... is exhausted") after a cycle that freed all 16 pages. */
#include <errno.h>

#include "check.h"

#define PAGE (64u << 10)

int main(void) {
  hl_heap *h = HEAP("reserve_bytes=1m", "page_size=64k", "small_max=256", "warm_pages=0",
                    "warm_demand_trims=0");
  /* every page carved and full: fills until the reservation runs out */
  hl_ref fills[64];
  int nf = 0;
  while (nf < 64 && hl_fill(h, PAGE / 2, 248, 0, &fills[nf]) == HL_OK) nf++;
  CHECK(nf > 0 && nf < 64, "%d fills", nf);
  hl_stats s = stats_of(h);
  CHECK(s.total_pages == 16 && s.free_pool_pages == 0 && s.released_pool_pages == 0,
        "%" PRIu64 " pages carved, %" PRIu64 " free, %" PRIu64 " released: expected 16 in use",
        s.total_pages, s.free_pool_pages, s.released_pool_pages);
  /* all garbage, not swept yet; a released page cannot come back */
  for (int i = 0; i < nf; i++) OK(h, hl_ref_release(h, fills[i]));
  OK(h, hl_inject(h, HL_SITE_restore, HL_FAULT_always, 0, EIO));

  uint64_t memory_cycles = s.memory_cycles, restores = s.restore_calls;
  hl_ref r;
  OK(h, hl_alloc(h, 8, 0, &r)); /* a class with no page: the memory cycle frees 16 */
  s = stats_of(h);
  CHECK(s.memory_cycles == memory_cycles + 1, "%" PRIu64 " memory cycles, expected 1",
        s.memory_cycles - memory_cycles);
  CHECK(s.restore_calls == restores && s.released_pool_pages == 0 && s.reuse_failed_pool_pages == 0,
        "the memory cycle released pages its allocation then restored: %" PRIu64
        " restore calls, %" PRIu64 " released, %" PRIu64 " reuse-failed",
        s.restore_calls - restores, s.released_pool_pages, s.reuse_failed_pool_pages);
  CHECK(s.free_pool_pages == 15, "%" PRIu64 " empty pages, expected 15", s.free_pool_pages);

  /* the next cycle's trim gives back what is beyond the warm cache */
  OK(h, hl_inject(h, HL_SITE_restore, HL_FAULT_off, 0, 0));
  OK(h, hl_collect(h, 1, 1));
  s = stats_of(h);
  CHECK(s.free_pool_pages == 0 && s.released_pool_pages == 15,
        "after a collection: %" PRIu64 " empty, %" PRIu64 " released, expected 0 and 15",
        s.free_pool_pages, s.released_pool_pages);
  OK(h, hl_ref_release(h, r));
  check_invariants(h);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
