/* Manual mode (the real interpreters' mode) with subpage_release: blocks
 * freed but for 1 in 100 leave partial pages whose empty OS pages a trim
 * gives back -- frees alone start it, as they start the whole-page trim --
 * and malloc into those holes restores them first.  The survivors keep their
 * bytes, the new blocks hold theirs, with the thread cache on and off, and
 * under verify (freed blocks sealed: a free slot next to a released OS page
 * is poisoned whole before the release, so the seal check holds). */
#include "check.h"

#define N 200000
#define SIZE 240

static void *blk[N];

static void fill_block(void *p, uint64_t i) {
  for (int k = 0; k < SIZE / 8; k++) ((uint64_t *)p)[k] = i * 1000003u + (uint64_t)k;
}
static int block_ok(const void *p, uint64_t i) {
  for (int k = 0; k < SIZE / 8; k++)
    if (((const uint64_t *)p)[k] != i * 1000003u + (uint64_t)k) return 0;
  return 1;
}

static void run(const char *tcache, const char *verify) {
  hl_heap *h = HEAP("mode=manual", "subpage_release=true", "warm_pages=0", tcache, verify);
  uint64_t r0 = resident_of(h);
  for (uint64_t i = 0; i < N; i++) {
    blk[i] = hl_malloc(h, SIZE);
    CHECK(blk[i], "malloc %" PRIu64 ": %s", i, hl_heap_error(h));
    fill_block(blk[i], i);
  }
  uint64_t r1 = resident_of(h);
  for (uint64_t i = 0; i < N; i++)
    if (i % 100) {
      hl_free_sized(h, blk[i], SIZE);
      blk[i] = NULL;
    }
  hl_thread_flush(h);
  hl_stats s = stats_of(h);
  CHECK(s.subpage_runs > 0, "%s %s: the frees started no sub-page trim", tcache, verify);
  OK(h, hl_trim(h)); /* what the last frees left below the threshold */
  check_invariants(h);
  s = stats_of(h);
  uint64_t r2 = resident_of(h);
  double frac = (double)(r1 - r2) / (double)(r1 - r0);
  printf("%s %s: %.1f%% returned, %.1f MiB in %" PRIu64 " runs\n", tcache, verify, 100 * frac,
         s.subpage_released_bytes / MiB, s.subpage_runs);
  CHECK(frac >= 0.70, "only %.1f%% returned", 100 * frac);
  for (uint64_t i = 0; i < N; i += 100) CHECK(block_ok(blk[i], i), "survivor %" PRIu64, i);
  /* malloc into the holes: restored first */
  for (uint64_t i = 0; i < N; i++)
    if (!blk[i]) {
      blk[i] = hl_malloc(h, SIZE);
      CHECK(blk[i], "malloc again %" PRIu64, i);
      fill_block(blk[i], i);
    }
  hl_thread_flush(h);
  check_invariants(h);
  hl_stats t = stats_of(h);
  CHECK(t.subpage_restores > 0 && t.subpage_released_bytes < s.subpage_released_bytes / 4,
        "restores %" PRIu64 ", %" PRIu64 " bytes still out", t.subpage_restores,
        t.subpage_released_bytes);
  CHECK(t.total_pages <= s.total_pages + 2, "refilling the holes took %" PRIu64 " new pages",
        t.total_pages - s.total_pages);
  for (uint64_t i = 0; i < N; i++) CHECK(block_ok(blk[i], i), "block %" PRIu64, i);
  for (uint64_t i = 0; i < N; i++) hl_free_sized(h, blk[i], SIZE);
  hl_thread_flush(h);
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
  run("tcache_blocks=1024", "verify=false");
  run("tcache_blocks=0", "verify=false");
  run("tcache_blocks=0", "verify=true");
  return 0;
}
