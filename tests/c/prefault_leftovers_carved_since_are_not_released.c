/* The prefault helper's unused chunks whose give-back was refused are
 * retried by later trims (release/prefault.c, hl__prefault_retry) -- only
 * what is still above every carved page.  Once a later fill has carved past
 * them all they are live pages of the heap: a trim releases nothing of them,
 * keeps every object, and forgets them (no retry, no back-off after it).
 *
 * Why: the retry's "carved since" end (the range left empty once the carved
 * pages are clamped off) was executed by no test (make coverage, session 43):
 * trims_back_off_after_giving_up keeps the release refused, so its trims give
 * up before any retry.  Without the clamp the retry's MADV_DONTNEED zeroed
 * the later fill's objects; without the empty-range end it asked the kernel
 * to release a range of negative length, was refused, and every
 * later trim retried it and backed off for nothing.
 *
 * A fill over 24 MiB of garbage (its estimate counts the garbage's pages as
 * fresh: the fill reuses them, the helper's chunks ahead stay unused) with
 * the release refused leaves chunks to retry -- most runs; tried until one
 * does (the helper must be ahead of the fill, as in trims_back_off). */
#include "check.h"
#include "internal.h" /* the helper's leftover range, the carved pages */

static uint32_t carved_chunks(hl_heap *h) {
  return (uint32_t)(((uint64_t)h->high_water + (1u << h->chunk_shift) - 1) >> h->chunk_shift);
}

/* 1: the check ran (leftovers made and carved past); 0: no leftover this run;
 * -1: no helper here. */
static int once(void) {
  hl_heap *h = HEAP("thp=madvise", "thp_prefault=8", "warm_pages=100000",
                    "warm_demand_trims=0", "gc_trigger_bytes=8m", "adaptive_trigger=0",
                    "gc_live_ratio=0");
  if (!stats_of(h).thp_enabled || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
    hl_heap_free(h);
    return -1;
  }
  hl_ref g, a, b;
  OK(h, hl_fill(h, 24u << 20, 248, 0, &g));
  OK(h, hl_ref_release(h, g));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, 11 /* EAGAIN */));
  OK(h, hl_inject(h, HL_SITE_fallback, HL_FAULT_always, 0, 11));
  OK(h, hl_fill(h, 32u << 20, 248, 0, &a));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
  OK(h, hl_inject(h, HL_SITE_fallback, HL_FAULT_off, 0, 0));
  uint32_t lo = h->thp_unused_lo, hi = h->thp_unused_hi;
  if (lo == hi) { /* none left this run */
    OK(h, hl_ref_release(h, a));
    hl_heap_free(h);
    return 0;
  }
  /* a fill that carves well past them (its own helper's unused chunks, if
   * any, given back at its end: the release works again) */
  uint64_t sum_a, n_a, sum_b, n_b, s2, n2;
  OK(h, hl_ref_checksum(h, a, &sum_a, &n_a));
  OK(h, hl_fill(h, 48u << 20, 248, 0, &b));
  OK(h, hl_ref_checksum(h, b, &sum_b, &n_b));
  CHECK(carved_chunks(h) > hi + 1, "the second fill carved to chunk %" PRIu32
        ", not past the leftovers [%" PRIu32 ", %" PRIu32 ")", carved_chunks(h), lo, hi);
  hl_stats s0 = stats_of(h);
  OK(h, hl_trim(h));
  hl_stats s1 = stats_of(h);
  CHECK(h->thp_unused_lo == h->thp_unused_hi,
        "the leftovers [%" PRIu32 ", %" PRIu32 "), carved since, are still to retry: [%" PRIu32
        ", %" PRIu32 ") (carved %" PRIu32 ")", lo, hi, h->thp_unused_lo, h->thp_unused_hi,
        carved_chunks(h));
  CHECK(s1.thp_prefault_unused == s0.thp_prefault_unused,
        "%" PRIu64 " carved chunks given back as the helper's unused ones",
        s1.thp_prefault_unused - s0.thp_prefault_unused);
  OK(h, hl_ref_checksum(h, a, &s2, &n2));
  CHECK(s2 == sum_a && n2 == n_a, "the first fill's objects changed (%" PRIu64 " of %" PRIu64 ")",
        n2, n_a);
  OK(h, hl_ref_checksum(h, b, &s2, &n2));
  CHECK(s2 == sum_b && n2 == n_b, "the second fill's objects changed (%" PRIu64 " of %" PRIu64
        ") -- the carved chunks released", n2, n_b);
  check_invariants(h);
  printf("leftovers [%" PRIu32 ", %" PRIu32 ") carved past (to chunk %" PRIu32 "): kept, "
         "forgotten\n", lo, hi, carved_chunks(h));
  OK(h, hl_ref_release(h, a));
  OK(h, hl_ref_release(h, b));
  hl_heap_free(h);
  return 1;
}

int main(void) {
  int tries = 0, r = 0;
  while (r == 0 && tries < 24) r = once(), tries++;
  if (r < 0) {
    puts("SKIP: no prefault helper here (no huge pages or one CPU)");
    return 77;
  }
  CHECK(r == 1, "no run of %d left the helper's chunks to retry: the retry was not exercised",
        tries);
  printf("ok (%d tr%s)\n", tries, tries == 1 ? "y" : "ies");
  return 0;
}
