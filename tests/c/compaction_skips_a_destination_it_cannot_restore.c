/* Compaction does not move objects into a destination page whose released
 * OS pages cannot be restored: that page is no destination after all, the
 * objects go to the next one, and nothing lands in an OS page still out.
 *
 * Why: with subpage_release, a partly live page gives back the OS pages in
 * which no slot is allocated; evacuate.c restores a destination's OS pages
 * before it moves objects into them (dest_room), and a restore that fails
 * (fault site restore) leaves the page SUB_FAILED and drops it from the
 * destinations.  No test executed that branch (h41cov: the compaction
 * always emptied the sparse pages before any sub-page release).  Here the
 * sub-page release comes first, in a cycle with nothing sparse to compact:
 *   D: 96 of 128 slots of 512 bytes live, its last 4 OS pages free;
 *   E: every other slot live (no free OS page);
 *   S: all live -- then all but every 16th dropped (6%, sparse).
 * A full cycle and hl_trim release D's 4 OS pages.  With the restore site
 * failing, the next full cycle compacts S: D, the densest destination, is
 * tried first and refused; S's 8 objects go to E.  Checked: a restore
 * failed and the cycle compacted S, every moved object is in E and none in
 * D, every object keeps its payload, hl_heap_check passes (no allocated slot
 * in an out OS page), D's OS pages are still out; with the fault off,
 * hl_trim puts D back and an allocation restores it. */
#include "check.h"

enum { SLOTS = 128, SIZE = 504, PAGE = 65536, N = 3 * SLOTS };

static hl_ref objs[N];
static bool live[N];

static uint64_t page_of(hl_heap *h, hl_ref r) {
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  return info.object / PAGE;
}

static void payloads_kept(hl_heap *h) {
  for (uint64_t i = 0; i < N; i++) {
    if (!live[i]) continue;
    uint64_t v = 0;
    OK(h, hl_ref_read(h, objs[i], 0, &v, sizeof v));
    CHECK(v == i * 0x9e3779b97f4a7c15ull, "object %" PRIu64 " lost its payload", i);
  }
}

static void drop(hl_heap *h, uint64_t i) {
  OK(h, hl_ref_release(h, objs[i]));
  live[i] = false;
}

int main(void) {
  hl_heap *h = HEAP("subpage_release=true", "compact=sparse", "warm_pages=0",
                    "warm_demand_trims=0", "verify=true", "gc_trigger_bytes=1073741824");
  for (uint64_t i = 0; i < N; i++) {
    OK(h, hl_alloc(h, SIZE, 0, &objs[i]));
    uint64_t v = i * 0x9e3779b97f4a7c15ull;
    OK(h, hl_ref_write(h, objs[i], 0, &v, sizeof v));
    live[i] = true;
  }
  uint64_t pd = page_of(h, objs[0]), pe = page_of(h, objs[SLOTS]), ps = page_of(h, objs[2 * SLOTS]);
  for (uint64_t i = 0; i < N; i++)
    CHECK(page_of(h, objs[i]) == (i < SLOTS ? pd : i < 2 * SLOTS ? pe : ps),
          "object %" PRIu64 " is not on the page expected: %d objects of %d bytes a page?", i,
          SLOTS, SIZE + 8);
  for (uint64_t i = 96; i < SLOTS; i++) drop(h, i);            /* D: last 4 OS pages free */
  for (uint64_t i = SLOTS + 1; i < 2 * SLOTS; i += 2) drop(h, i); /* E: half, none free */
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_trim(h));
  hl_stats s = stats_of(h);
  CHECK(s.compactions == 0, "nothing was sparse, yet %" PRIu64 " compactions", s.compactions);
  CHECK(s.subpage_pages == 1 && s.subpage_released_bytes == 4 * 4096,
        "D's 4 free OS pages were to be released: %" PRIu64 " pages, %" PRIu64 " bytes",
        s.subpage_pages, s.subpage_released_bytes);
  check_invariants(h);

  for (uint64_t i = 2 * SLOTS; i < N; i++)
    if (i % 16) drop(h, i); /* S: 8 of 128 live */
  OK(h, hl_inject_named(h, "restore", "always", 0, "EIO"));
  OK(h, hl_collect(h, 1, 1));
  s = stats_of(h);
  CHECK(s.compactions == 1, "S was not compacted (%" PRIu64 " compactions)", s.compactions);
  CHECK(s.subpage_restore_failed >= 1, "no restore of D was refused");
  for (uint64_t i = 2 * SLOTS; i < N; i += 16) {
    uint64_t p = page_of(h, objs[i]);
    CHECK(p != pd, "object %" PRIu64 " moved into D, whose OS pages were not restored", i);
    CHECK(p == pe, "object %" PRIu64 " is on page %" PRIu64 ", not E's (%" PRIu64 ")", i, p, pe);
  }
  payloads_kept(h);
  check_invariants(h); /* no allocated slot in an OS page still out */
  s = stats_of(h);
  CHECK(s.subpage_pages == 1 && s.subpage_released_bytes == 4 * 4096,
        "D's OS pages are still out: %" PRIu64 " pages, %" PRIu64 " bytes", s.subpage_pages,
        s.subpage_released_bytes);

  /* the fault off: the next trim puts D back, and an allocation restores it */
  OK(h, hl_inject_named(h, "restore", "off", 0, NULL));
  OK(h, hl_trim(h));
  for (int k = 0; k < SLOTS; k++) {
    hl_ref r;
    OK(h, hl_alloc(h, SIZE, 0, &r));
  }
  s = stats_of(h);
  CHECK(s.subpage_restores >= 1, "no restore after the fault was off");
  payloads_kept(h);
  check_invariants(h);
  hl_heap_free(h);
  printf("compaction: D refused (restore failed), S's objects moved to E\n");
  return 0;
}
