/* An object larger than the whole heap_limit_bytes fails at once with
 * ENOMEM naming the limit -- no collection can make room for it.  Before the
 * fix each refusal paid major cycles first (and pacing waits, with the
 * background collector): a 600 MiB object under a 512 MiB limit cost 5 cycles
 * for 5 refusals in sync mode, 10 and 1.5 s in background (the pacing hunt,
 * session 30).  An object that fits the limit is still taken. */
#include "check.h"

static void refusals(const char *collector) {
  char opt[64];
  snprintf(opt, sizeof opt, "collector=%s", collector);
  hl_heap *h = HEAP(opt, "heap_limit_bytes=64m", "large_trigger_bytes=1m", "mark_threads=1");
  hl_ref keep, r;
  OK(h, hl_fill(h, 16u << 20, 64, 1, &keep));
  hl_stats a = stats_of(h);
  for (int i = 0; i < 5; i++) {
    FAILS(h, HL_ENOMEM, "heap_limit_bytes 67108864", hl_alloc(h, 100u << 20, 0, &r));
    CHECK(r == 0, "a refused allocation left handle %" PRIu64, (uint64_t)r);
  }
  hl_stats b = stats_of(h);
  printf("%s: %s; %" PRIu64 " cycles, %" PRIu64 " pacing waits for 5 refusals\n", collector,
         hl_heap_error(h), b.cycles - a.cycles, b.pacing_waits - a.pacing_waits);
  CHECK(b.cycles == a.cycles, "%" PRIu64 " cycles ran for 5 refusals", b.cycles - a.cycles);
  CHECK(b.pacing_waits == a.pacing_waits, "%" PRIu64 " pacing waits for 5 refusals",
        b.pacing_waits - a.pacing_waits);
  CHECK(strstr(hl_heap_error(h), "is less than the 104857608 bytes asked: no collection can "
                                 "make room"), "%s", hl_heap_error(h));
  /* what fits the limit is taken */
  OK(h, hl_alloc(h, 32u << 20, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_ref_release(h, keep));
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
  refusals("sync");
  refusals("background");
  /* a limit below a small object's slot: the small path refuses too */
  hl_heap *h = HEAP("heap_limit_bytes=100");
  hl_ref r;
  FAILS(h, HL_ENOMEM, "heap_limit_bytes 100 is less than", hl_alloc(h, 200, 0, &r));
  OK(h, hl_alloc(h, 16, 0, &r));
  hl_heap_free(h);
  /* the bound is the limit itself: an object whose block is exactly
   * heap_limit_bytes (a 1 MiB - 8 payload and its 8-byte header) is taken
   * on an empty heap, 16 bytes more refused at once (mutants
   * limit-refuses-an-object-of-the-whole-limit and limit-reached-a-byte-early,
   * session 37: '<' for '<=' in the whole-limit test, '>=' for '>' in the
   * live-bytes test, which refused it after a collection) */
  h = HEAP("heap_limit_bytes=1m");
  OK(h, hl_alloc(h, (1u << 20) - 8, 0, &r));
  CHECK(stats_of(h).large_live_bytes == 1u << 20, "the block is not the limit's size");
  OK(h, hl_ref_release(h, r));
  FAILS(h, HL_ENOMEM, "heap_limit_bytes 1048576 is less than the 1048592 bytes asked",
        hl_alloc(h, (1u << 20) + 8, 0, &r));
  hl_heap_free(h);
  puts("ok");
  return 0;
}
