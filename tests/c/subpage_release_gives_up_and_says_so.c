/* Sub-page release and restore that give up, or whose fallback is refused
 * too, record nothing as released, say so (event syscall_gave_up naming the
 * site), keep the heap whole, and a later trim or allocation does the work.
 *
 * Why: subpage_release_faults_are_honest's EAGAIN scenario gives up in the
 * whole-page release, before the sub-page pass runs, and its fallback
 * scenario's fallback succeeds: release_run's gave-up and refused-fallback
 * branches and hl__sub_restore's gave-up event were executed by no test
 * (h41cov).  Here one page of 128 slots of 512 bytes is the heap's only
 * page: 96 slots live, its last 4 OS pages free -- no whole page to release
 * first, so the trim's sub-page pass meets the fault:
 *   1. release EAGAIN that does not clear (syscall_retry_max=3): the trim
 *      gives up -- nothing released, event syscall_gave_up site release;
 *   2. release EINVAL and fallback_advice=free refused too (EAGAIN, given
 *      up): nothing released, none on the fallback, a rejected run, event
 *      syscall_gave_up site fallback;
 *   3. the 4 OS pages released, then restore EAGAIN that does not clear:
 *      allocations go to a new page, event syscall_gave_up site restore.
 *   4. the page emptied with its 4 OS pages out and taken from the free
 *      pool while the restore gives up: back to the free pool, a fresh page
 *      serves (not formatted over released memory, its "restore failed"
 *      mark dropped), and taken and restored once the fault is off.
 * After each, with the fault off, hl_trim releases the 4 OS pages (1, 2) or
 * an allocation restores them (3); hl_heap_check passes at every step and
 * every live object keeps its payload. */
#include "check.h"

enum { SLOTS = 128, LIVE = 96, SIZE = 504, OS = 4096 };

static hl_ref objs[SLOTS];

static hl_heap *one_page_heap(const char *fallback) {
  hl_heap *h = HEAP("subpage_release=true", "warm_pages=0", "warm_demand_trims=0",
                    "syscall_retry_max=3", "syscall_retry_backoff_us=0", fallback,
                    "gc_trigger_bytes=1073741824");
  for (uint64_t i = 0; i < SLOTS; i++) {
    OK(h, hl_alloc(h, SIZE, 0, &objs[i]));
    OK(h, hl_ref_write(h, objs[i], 0, &i, sizeof i));
  }
  for (uint64_t i = LIVE; i < SLOTS; i++) OK(h, hl_ref_release(h, objs[i]));
  return h;
}

static void kept(hl_heap *h) {
  for (uint64_t i = 0; i < LIVE; i++) {
    uint64_t v = ~i;
    OK(h, hl_ref_read(h, objs[i], 0, &v, sizeof v));
    CHECK(v == i, "object %" PRIu64 " lost its payload", i);
  }
  check_invariants(h);
}

/* The sites of the syscall_gave_up events since the last call (a bit each). */
static unsigned gave_up_sites(hl_heap *h, int64_t *err) {
  static hl_event ev[1024];
  size_t n = 0;
  OK(h, hl_events_read(h, ev, 1024, &n, 1));
  unsigned sites = 0;
  *err = 0;
  for (size_t i = 0; i < n; i++) {
    if (ev[i].kind != HL_EV_syscall_gave_up) continue;
    sites |= 1u << ev[i].fields[0];
    *err = ev[i].fields[1];
  }
  return sites;
}

static void released_later(hl_heap *h, const char *what) {
  OK(h, hl_inject_named(h, "any", "off", 0, NULL));
  OK(h, hl_inject_named(h, "release", "off", 0, NULL));
  OK(h, hl_inject_named(h, "fallback", "off", 0, NULL));
  OK(h, hl_trim(h));
  hl_stats s = stats_of(h);
  CHECK(s.subpage_released_bytes == 4 * OS && s.subpage_fallback_bytes == 0,
        "%s: with the fault off hl_trim released %" PRIu64 " bytes (%" PRIu64
        " on the fallback), expected the 4 free OS pages", what, s.subpage_released_bytes,
        s.subpage_fallback_bytes);
  kept(h);
}

int main(void) {
  int64_t err = 0;

  /* 1: the primary advice gives up */
  hl_heap *h = one_page_heap("fallback_advice=none");
  OK(h, hl_inject_named(h, "release", "always", 0, "EAGAIN"));
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_trim(h));
  hl_stats s = stats_of(h);
  CHECK(s.subpage_released_bytes == 0 && s.subpage_pages == 0,
        "release gave up, yet %" PRIu64 " bytes released", s.subpage_released_bytes);
  unsigned sites = gave_up_sites(h, &err);
  CHECK(sites & (1u << HL_SITE_release) && err == EAGAIN,
        "no event syscall_gave_up at site release (sites 0x%x, errno %" PRId64 ")", sites, err);
  CHECK(s.syscall_gave_up >= 1, "syscall_gave_up %" PRIu64, s.syscall_gave_up);
  kept(h);
  released_later(h, "release gave up");
  hl_heap_free(h);

  /* 2: the primary advice refused, the fallback too (given up) */
  h = one_page_heap("fallback_advice=free");
  OK(h, hl_inject_named(h, "release", "always", 0, "EINVAL"));
  OK(h, hl_inject_named(h, "fallback", "always", 0, "EAGAIN"));
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_trim(h));
  s = stats_of(h);
  CHECK(s.subpage_released_bytes == 0 && s.subpage_fallback_bytes == 0,
        "both advices refused, yet %" PRIu64 " bytes released (%" PRIu64 " on the fallback)",
        s.subpage_released_bytes, s.subpage_fallback_bytes);
  CHECK(s.subpage_rejected_runs >= 1, "the refused run was not counted rejected");
  sites = gave_up_sites(h, &err);
  CHECK(sites & (1u << HL_SITE_fallback) && err == EAGAIN,
        "no event syscall_gave_up at site fallback (sites 0x%x, errno %" PRId64 ")", sites, err);
  kept(h);
  released_later(h, "fallback refused");
  hl_heap_free(h);

  /* 3: the restore gives up */
  h = one_page_heap("fallback_advice=none");
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_trim(h));
  s = stats_of(h);
  CHECK(s.subpage_released_bytes == 4 * OS, "%" PRIu64 " bytes released, expected %d",
        s.subpage_released_bytes, 4 * OS);
  (void)gave_up_sites(h, &err);
  OK(h, hl_inject_named(h, "restore", "always", 0, "EAGAIN"));
  hl_ref more[SLOTS - LIVE];
  for (uint64_t i = 0; i < SLOTS - LIVE; i++) OK(h, hl_alloc(h, SIZE, 0, &more[i]));
  s = stats_of(h);
  CHECK(s.subpage_restore_failed >= 1 && s.subpage_released_bytes == 4 * OS,
        "restore: %" PRIu64 " failed, %" PRIu64 " bytes still out", s.subpage_restore_failed,
        s.subpage_released_bytes);
  sites = gave_up_sites(h, &err);
  CHECK(sites & (1u << HL_SITE_restore) && err == EAGAIN,
        "no event syscall_gave_up at site restore (sites 0x%x, errno %" PRId64 ")", sites, err);
  kept(h);
  OK(h, hl_inject_named(h, "restore", "off", 0, NULL));
  OK(h, hl_trim(h)); /* the held page back on its list */
  for (uint64_t i = 0; i < 2 * SLOTS; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, SIZE, 0, &r));
  }
  s = stats_of(h);
  CHECK(s.subpage_restores >= 1 && s.subpage_released_bytes == 0,
        "with the fault off: %" PRIu64 " restores, %" PRIu64 " bytes still out",
        s.subpage_restores, s.subpage_released_bytes);
  kept(h);
  hl_heap_free(h);

  /* 4: the page emptied with its 4 OS pages out, then taken from the free
   * pool with the restore giving up: it goes back to the free pool (not
   * formatted over released memory), a fresh page serves; with the fault off
   * the next page taken is it, restored (reuse.c hl__acquire_page: no test
   * reached it, make coverage at ee5b4a1) */
  h = HEAP("subpage_release=true", "warm_pages=64", "warm_demand_trims=0",
           "syscall_retry_max=3", "syscall_retry_backoff_us=0", "fallback_advice=none",
           "gc_trigger_bytes=1073741824");
  for (uint64_t i = 0; i < SLOTS; i++) OK(h, hl_alloc(h, SIZE, 0, &objs[i]));
  for (uint64_t i = LIVE; i < SLOTS; i++) OK(h, hl_ref_release(h, objs[i]));
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_trim(h));
  CHECK(stats_of(h).subpage_released_bytes == 4 * OS, "%" PRIu64 " bytes released, expected %d",
        stats_of(h).subpage_released_bytes, 4 * OS);
  for (uint64_t i = 0; i < LIVE; i++) OK(h, hl_ref_release(h, objs[i]));
  OK(h, hl_collect(h, 1, 1));
  s = stats_of(h);
  CHECK(s.free_pool_pages == 1 && s.total_pages == 1 && s.subpage_released_bytes == 4 * OS,
        "emptied: %" PRIu64 " free pages of %" PRIu64 ", %" PRIu64 " bytes still out",
        s.free_pool_pages, s.total_pages, s.subpage_released_bytes);
  (void)gave_up_sites(h, &err);
  OK(h, hl_inject_named(h, "restore", "always", 0, "EAGAIN"));
  hl_ref one;
  OK(h, hl_alloc(h, SIZE, 0, &one));
  uint64_t v = 42;
  OK(h, hl_ref_write(h, one, 0, &v, sizeof v));
  hl_stats t = stats_of(h);
  CHECK(t.total_pages == 2 && t.fresh_pages == s.fresh_pages + 1 && t.free_pool_pages == 1,
        "the emptied page's restore gave up, yet no fresh page served (%" PRIu64 " pages, %" PRIu64
        " free, %" PRIu64 " fresh)", t.total_pages, t.free_pool_pages, t.fresh_pages - s.fresh_pages);
  CHECK(t.subpage_restore_failed > s.subpage_restore_failed && t.subpage_released_bytes == 4 * OS,
        "restore: %" PRIu64 " failed, %" PRIu64 " bytes still out",
        t.subpage_restore_failed - s.subpage_restore_failed, t.subpage_released_bytes);
  sites = gave_up_sites(h, &err);
  CHECK(sites & (1u << HL_SITE_restore) && err == EAGAIN,
        "no event syscall_gave_up at site restore (sites 0x%x, errno %" PRId64 ")", sites, err);
  check_invariants(h);
  OK(h, hl_inject_named(h, "restore", "off", 0, NULL));
  for (uint64_t i = 1; i < SLOTS + 1; i++) OK(h, hl_alloc(h, SIZE, 0, &objs[i % SLOTS]));
  t = stats_of(h);
  CHECK(t.total_pages == 2 && t.free_pool_pages == 0 && t.subpage_released_bytes == 0,
        "with the fault off: %" PRIu64 " pages, %" PRIu64 " free, %" PRIu64 " bytes still out",
        t.total_pages, t.free_pool_pages, t.subpage_released_bytes);
  CHECK(first_word(h, one) == 42, "the object on the fresh page lost its payload");
  check_invariants(h);
  hl_heap_free(h);
  printf("sub-page release and restore: gave up and refused, said so, done later\n");
  return 0;
}
