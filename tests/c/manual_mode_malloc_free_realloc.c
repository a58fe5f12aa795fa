/* Manual mode behaves like malloc: every block is 16-byte aligned and its
 * own (0 bytes too), calloc zeroes and refuses overflow, realloc keeps the
 * contents across size classes and to and from the large path, unsized and
 * sized free both work, and a collected heap refuses the manual calls with
 * HL_EMODE instead of corrupting itself. */
#include <stdint.h>

#include "check.h"

static void fill(void *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) ((unsigned char *)p)[i] = (unsigned char)(seed * 31 + i * 7);
}

static int intact(const void *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++)
    if (((const unsigned char *)p)[i] != (unsigned char)(seed * 31 + i * 7)) return 0;
  return 1;
}

#define NBLOCKS 4000

int main(void) {
  hl_heap *h = HEAP("mode=manual");
  hl_options o;
  OK(h, hl_heap_options(h, &o));
  size_t small_max = (size_t)o.small_max;

  /* 0 bytes: a unique, freeable block each time */
  void *z1 = hl_malloc(h, 0), *z2 = hl_malloc(h, 0);
  CHECK(z1 && z2 && z1 != z2, "malloc(0) gave %p and %p", z1, z2);
  CHECK(hl_usable_size(h, z1) >= 1, "malloc(0) has no usable byte");
  hl_free(h, z1);
  hl_free_sized(h, z2, 0);

  /* many blocks of every size up to twice small_max: aligned, disjoint */
  static void *blk[NBLOCKS];
  static size_t len[NBLOCKS];
  for (unsigned i = 0; i < NBLOCKS; i++) {
    len[i] = (i * 37) % (2 * small_max + 1);
    blk[i] = hl_malloc(h, len[i]);
    CHECK(blk[i], "malloc(%zu) failed: %s", len[i], hl_heap_error(h));
    CHECK(((uintptr_t)blk[i] & 15) == 0, "malloc(%zu) = %p is not 16-byte aligned", len[i],
          blk[i]);
    CHECK(hl_usable_size(h, blk[i]) >= len[i], "usable %zu < %zu",
          hl_usable_size(h, blk[i]), len[i]);
    fill(blk[i], len[i], i);
  }
  for (unsigned i = 0; i < NBLOCKS; i++)
    CHECK(intact(blk[i], len[i], i), "block %u (%zu bytes) was overwritten", i, len[i]);
  check_invariants(h);
  hl_stats s = stats_of(h);
  CHECK(s.large_objects > 0 && s.small_live_bytes > 0, "both paths used: %" PRIu64 " large",
        s.large_objects);

  /* free half unsized, half sized; the rest still intact */
  for (unsigned i = 0; i < NBLOCKS; i += 2) {
    if (i % 4) hl_free(h, blk[i]);
    else hl_free_sized(h, blk[i], len[i]);
    blk[i] = NULL;
  }
  for (unsigned i = 1; i < NBLOCKS; i += 2)
    CHECK(intact(blk[i], len[i], i), "block %u damaged by freeing its neighbours", i);

  /* realloc: grow through every class and into the large path, then shrink
   * back to one byte; the common prefix survives every move */
  for (unsigned i = 1; i < 200; i += 2) {
    size_t cur = len[i];
    size_t steps[] = {cur + 1, 48, 200, small_max, small_max + 1, 5000, 70000, 300, 16, 1};
    for (size_t k = 0; k < sizeof steps / sizeof steps[0]; k++) {
      size_t keep = cur < steps[k] ? cur : steps[k];
      void *q = hl_realloc(h, blk[i], cur, steps[k]);
      CHECK(q, "realloc(%zu -> %zu) failed: %s", cur, steps[k], hl_heap_error(h));
      CHECK(((uintptr_t)q & 15) == 0, "realloc result %p not aligned", q);
      CHECK(intact(q, keep, i), "realloc %zu -> %zu lost the contents", cur, steps[k]);
      blk[i] = q;
      cur = steps[k];
      fill(q, cur, i);
    }
    len[i] = cur;
  }
  /* large to large goes through the system realloc: 1 MiB -> 8 MiB (mremap
   * territory) -> 2 MiB keeps the prefix, and the counters follow */
  unsigned char *g = hl_malloc(h, 1 << 20);
  CHECK(g, "malloc 1 MiB");
  fill(g, 1 << 20, 77);
  g = hl_realloc(h, g, 1 << 20, 8 << 20);
  CHECK(g && intact(g, 1 << 20, 77), "1 -> 8 MiB lost the contents");
  fill(g, 8 << 20, 78);
  hl_stats sg = stats_of(h);
  g = hl_realloc(h, g, 8 << 20, 2 << 20);
  CHECK(g && intact(g, 2 << 20, 78), "8 -> 2 MiB lost the contents");
  hl_stats sg2 = stats_of(h);
  CHECK(sg.large_live_bytes - sg2.large_live_bytes == (6u << 20),
        "shrinking by 6 MiB moved large_live_bytes by %" PRIu64,
        sg.large_live_bytes - sg2.large_live_bytes);
  CHECK(hl_usable_size(h, g) == (2u << 20), "usable size after the shrink: %zu",
        hl_usable_size(h, g));
  hl_free_sized(h, g, 2 << 20);

  /* realloc(NULL, n) allocates; realloc(p, 0) frees and returns NULL */
  void *r = hl_realloc(h, NULL, 0, 100);
  CHECK(r, "realloc(NULL, 100) failed");
  CHECK(hl_realloc(h, r, 100, 0) == NULL, "realloc(p, 0) did not return NULL");
  /* old_size 0 is "unknown" when freeing too: the block goes back to its own
   * class (a sized free of 0 put a 400-byte block in the smallest class's
   * bin, the next malloc(0) got it; under verify it was refused as a size
   * mismatch and stayed live) */
  for (int v = 0; v < 2; v++) {
    hl_heap *m = HEAP("mode=manual", v ? "verify=1" : "verify=0");
    hl_free(m, hl_malloc(m, 0)); /* (the smallest class's bin in use) */
    void *b = hl_malloc(m, 400);
    CHECK(b, "malloc(400): %s", hl_heap_error(m));
    CHECK(hl_realloc(m, b, 0, 0) == NULL, "realloc(p, 0 (unknown), 0) did not return NULL");
    CHECK(hl_heap_error(m)[0] == 0, "verify=%d: realloc(p, 0, 0) refused: %s", v,
          hl_heap_error(m));
    void *z = hl_malloc(m, 0);
    CHECK(z != b, "a 0-byte malloc got the 400-byte block realloc(p, 0, 0) freed");
    hl_free(m, z);
    hl_thread_flush(m);
    hl_stats ms = stats_of(m);
    CHECK(ms.small_live_bytes == 0, "verify=%d: realloc(p, 0, 0) left %" PRIu64 " bytes live", v,
          ms.small_live_bytes);
    check_invariants(m);
    hl_heap_free(m);
  }

  /* calloc zeroes (a recycled slot holds garbage first) and refuses overflow */
  for (unsigned i = 0; i < 64; i++) {
    unsigned char *c = hl_calloc(h, 3 + i, 16);
    CHECK(c, "calloc failed");
    for (size_t k = 0; k < (3 + i) * 16; k++) CHECK(c[k] == 0, "calloc byte %zu is %d", k, c[k]);
    memset(c, 0xEE, (3 + i) * 16);
    hl_free(h, c);
  }
  CHECK(hl_calloc(h, SIZE_MAX / 2, 4) == NULL, "calloc overflow returned a block");
  CHECK(strstr(hl_heap_error(h), "overflow"), "calloc overflow message: %s", hl_heap_error(h));

  /* free(NULL) is a no-op; a foreign pointer is refused, nothing is freed */
  hl_free(h, NULL);
  hl_free_sized(h, NULL, 10);
  int on_stack;
  hl_free(h, &on_stack);
  CHECK(strstr(hl_heap_error(h), "not a block"), "foreign free message: %s", hl_heap_error(h));
  CHECK(hl_usable_size(h, &on_stack) == 0, "usable_size of a foreign pointer");
  CHECK(hl_realloc(h, &on_stack, 4, 8) == NULL, "realloc of a foreign pointer");

  for (unsigned i = 1; i < NBLOCKS; i += 2) {
    CHECK(intact(blk[i], len[i], i), "block %u damaged at the end", i);
    hl_free_sized(h, blk[i], len[i]);
  }
  hl_thread_flush(h);
  check_invariants(h);
  s = stats_of(h);
  CHECK(s.small_live_bytes == 0 && s.large_live_bytes == 0 && s.large_objects == 0,
        "after freeing everything: %" PRIu64 " small, %" PRIu64 " large bytes live",
        s.small_live_bytes, s.large_live_bytes);
  CHECK(s.manual_mallocs == s.manual_frees, "%" PRIu64 " mallocs but %" PRIu64 " frees",
        s.manual_mallocs, s.manual_frees);

  /* one thread alternating between two heaps: each heap's cache stays its
   * own, and blocks never cross heaps */
  hl_heap *h2 = HEAP("mode=manual");
  for (unsigned round = 0; round < 3; round++) {
    for (unsigned i = 0; i < NBLOCKS; i++) {
      len[i] = 16 + (i * 29) % 400;
      blk[i] = hl_malloc(i & 1 ? h2 : h, len[i]);
      CHECK(blk[i], "alternating malloc %u", i);
      fill(blk[i], len[i], i + round);
    }
    for (unsigned i = 0; i < NBLOCKS; i++) {
      CHECK(intact(blk[i], len[i], i + round), "alternating block %u damaged", i);
      hl_free_sized(i & 1 ? h2 : h, blk[i], len[i]);
    }
  }
  hl_thread_flush(h2);
  check_invariants(h2);
  CHECK(stats_of(h2).small_live_bytes == 0, "the second heap kept blocks");
  hl_heap_free(h2);
  hl_thread_flush(h);
  check_invariants(h);
  CHECK(stats_of(h).small_live_bytes == 0, "the first heap kept blocks");
  hl_heap_free(h);

  /* no cache at all (tcache_blocks=0) runs the same paths under the lock */
  h = HEAP("mode=manual", "tcache_blocks=0");
  for (unsigned i = 0; i < NBLOCKS; i++) {
    blk[i] = hl_malloc(h, len[i] = (i * 13) % 700);
    fill(blk[i], len[i], i);
  }
  for (unsigned i = 0; i < NBLOCKS; i++) {
    CHECK(intact(blk[i], len[i], i), "uncached block %u damaged", i);
    hl_free(h, blk[i]);
  }
  check_invariants(h);
  s = stats_of(h);
  CHECK(s.small_live_bytes == 0 && s.manual_mallocs == NBLOCKS && s.manual_frees == NBLOCKS,
        "uncached: live %" PRIu64 ", %" PRIu64 " mallocs, %" PRIu64 " frees", s.small_live_bytes,
        s.manual_mallocs, s.manual_frees);
  hl_heap_free(h);

  /* a collected heap refuses manual calls */
  h = HEAP("mode=collected");
  CHECK(hl_malloc(h, 16) == NULL, "malloc on a collected heap");
  CHECK(strstr(hl_heap_error(h), "mode=manual"), "message: %s", hl_heap_error(h));
  CHECK(hl_malloc(h, 100000) == NULL, "large malloc on a collected heap");
  hl_ref ref;
  OK(h, hl_alloc(h, 32, 0, &ref));
  hl_object_info info;
  OK(h, hl_ref_info(h, ref, &info));
  hl_free(h, (void *)(uintptr_t)info.address);
  CHECK(strstr(hl_heap_error(h), "free: needs a manual heap"), "free on a collected heap: %s",
        hl_heap_error(h));
  CHECK(hl_malloc(h, 16) == NULL, "malloc on a collected heap after a free");
  CHECK(hl_realloc(h, (void *)(uintptr_t)info.address, 32, 64) == NULL,
        "realloc on a collected heap");
  CHECK(strstr(hl_heap_error(h), "realloc: needs a manual heap"), "realloc message: %s",
        hl_heap_error(h));
  OK(h, hl_collect(h, 1, 1));
  OK(h, hl_ref_info(h, ref, &info)); /* still alive */
  check_invariants(h);
  hl_heap_free(h);
  puts("manual mode: malloc, calloc, realloc, sized and unsized free behave");
  return 0;
}
