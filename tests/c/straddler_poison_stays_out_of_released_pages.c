/* verify + subpage_release: a free slot straddling the edge of an OS page
 * about to be released is poisoned first -- but only its bytes in OS pages
 * still in.  poison_straddlers poisoned the whole slot, also its part in a
 * neighbouring OS page released before: that write faulted the released
 * page back in (resident while counted out, part poison, part zeros), and
 * once the page was emptied, released whole with MADV_FREE (the fallback,
 * the primary refused) and taken again, verify reported "written after its
 * objects were freed" on a correct program (the moving collector hunt,
 * session 30).  Both modes run the same trim: collected and manual. */
#include "check.h"

enum { N = 39, SLOT = 416 }; /* 416-byte slots: 39 on a 16 KiB page */

static hl_heap *h;
static int manual;
static void *blk[N];
static hl_ref ref[N];
/* manual verify keeps the last 256 freed blocks in a quarantine: blocks of
 * another class freed after them push them out, to their page */
enum { PUSH = 256 };
static void *pusher[3 * PUSH];
static int pushed;

static uint64_t take(int i) {
  if (manual) {
    blk[i] = hl_malloc(h, 408);
    CHECK(blk[i], "malloc: %s", hl_heap_error(h));
    return (uint64_t)(uintptr_t)blk[i];
  }
  OK(h, hl_alloc(h, 408, 0, &ref[i]));
  hl_object_info info;
  OK(h, hl_ref_info(h, ref[i], &info));
  return info.object;
}

static void drop(int from, int to) {
  for (int i = from; i <= to; i++) {
    if (manual) hl_free_sized(h, blk[i], 408);
    else OK(h, hl_ref_release(h, ref[i]));
  }
  if (manual)
    for (int k = 0; k < PUSH; k++) hl_free_sized(h, pusher[pushed++], 32);
  else
    OK(h, hl_collect(h, 1, 1));
  OK(h, hl_trim(h));
}

static void run(const char *mode) {
  manual = !strcmp(mode, "mode=manual");
  h = HEAP(mode, "verify=1", "subpage_release=1", "page_size=16384", "warm_pages=0",
           "warm_demand_trims=0", "tenure_full_marks=0", "tcache_blocks=0");
  pushed = 0;
  if (manual)
    for (int k = 0; k < 3 * PUSH; k++) CHECK((pusher[k] = hl_malloc(h, 32)), "malloc");
  uint64_t base = take(0), slot = SLOT;
  for (int i = 1; i < N; i++) {
    uint64_t a = take(i);
    if (i == 1) slot = a - base;
    CHECK(a == base + slot * (uint64_t)i, "%s: block %d is not in slot %d of one page", mode, i, i);
  }
  CHECK(slot == SLOT, "%s: %" PRIu64 "-byte slots, the scenario needs %d", mode, slot, SLOT);
  /* a manual heap allocates from a page its class owns, which no trim
   * touches: one more block makes another page the owned one */
  void *extra = manual ? hl_malloc(h, 408) : NULL;
  CHECK(base % 16384 == 0, "%s: the first block is not at its page's start", mode);
  /* slots 9..19 overlap OS page 1 ([4096, 8192)) and nothing else of theirs
   * is live: it goes out */
  drop(9, 19);
  unsigned char vec[4];
  CHECK(mincore((void *)(uintptr_t)base, 16384, vec) == 0, "mincore");
  CHECK(!(vec[1] & 1), "%s: OS page 1 was not released by the first trim", mode);
  /* slots 0..8: OS page 0 goes out; slot 9 straddles from it into page 1 */
  drop(0, 8);
  CHECK(mincore((void *)(uintptr_t)base, 16384, vec) == 0, "mincore");
  CHECK(!(vec[0] & 1) && !(vec[1] & 1), "%s: OS pages 0 and 1 counted out, resident %d %d (the "
        "straddler's poison faulted page 1 back in)", mode, vec[0] & 1, vec[1] & 1);
  check_invariants(h);
  /* the page emptied and released whole with MADV_FREE (the primary refused,
   * no upgrade), then taken again: nothing was written after free */
  OK(h, hl_inject_named(h, "release", "always", 0, "ENOMEM"));
  OK(h, hl_inject_named(h, "upgrade", "always", 0, "ENOMEM"));
  drop(20, N - 1);
  OK(h, hl_inject_named(h, "release", "off", 0, NULL));
  OK(h, hl_inject_named(h, "upgrade", "off", 0, NULL));
  take(0);
  hl_stats s = stats_of(h);
  CHECK(s.verify_failures == 0, "%s: %" PRIu64 " verify failures on a correct program: %s", mode,
        s.verify_failures, hl_heap_error(h));
  check_invariants(h);
  if (manual) {
    hl_free_sized(h, blk[0], 408);
    hl_free_sized(h, extra, 408);
    while (pushed < 3 * PUSH) hl_free_sized(h, pusher[pushed++], 32);
  }
  else OK(h, hl_ref_release(h, ref[0]));
  hl_heap_free(h);
  printf("%s: ok\n", mode);
}

int main(void) {
  run("mode=collected");
  run("mode=manual");
  return 0;
}
