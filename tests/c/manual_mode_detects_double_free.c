/* With verify on, manual mode catches the caller's mistakes instead of
 * corrupting the heap: a double free (small and large), a free of an
 * interior or foreign pointer, a sized free with the wrong size and a
 * realloc of a freed block are refused with a message, and nothing live is
 * harmed; a write into a freed block is reported by hl_heap_check. */
#include "check.h"

static void expect_error(hl_heap *h, const char *needle, const char *what) {
  CHECK(strstr(hl_heap_error(h), needle), "%s: message '%s' does not mention '%s'", what,
        hl_heap_error(h), needle);
}

/* Without verify and without a thread cache a free goes straight to its
 * slot, whose own check (small.c hl__small_give_checked: the slot's start,
 * its allocation bit) still refuses what is no live block: an interior
 * pointer gave the slot it points into back (its block freed under its
 * owner, then handed out twice), and a second free counted the block free
 * again (the page's counts one off each time: mutants
 * small-free-of-an-interior-pointer and small-double-free-gives-the-slot-again,
 * session 37). */
static void slot_checks_without_verify(void) {
  hl_heap *h = HEAP("mode=manual", "verify=false", "tcache_blocks=0");
  char *d = hl_malloc(h, 64);
  CHECK(d, "malloc");
  memset(d, 0x4d, 64);
  hl_stats before = stats_of(h);
  hl_free(h, d + 16);
  expect_error(h, "(interior pointer)", "interior free without verify");
  hl_stats after = stats_of(h);
  CHECK(after.objects_freed == before.objects_freed && after.small_live_bytes ==
        before.small_live_bytes, "the interior free freed the block");
  char *e = hl_malloc(h, 64);
  CHECK(e && e != d, "the block was handed out twice after an interior free");
  for (int i = 0; i < 64; i++) CHECK(d[i] == 0x4d, "the live block changed at %d", i);
  hl_free(h, d);
  before = stats_of(h);
  hl_free(h, d);
  expect_error(h, "not a live block (double free?)", "double free without verify");
  after = stats_of(h);
  CHECK(after.objects_freed == before.objects_freed, "the second free was counted");
  char *f = hl_malloc(h, 64), *g = hl_malloc(h, 64);
  CHECK(f && g && f != g, "one block handed out twice after a double free");
  hl_free(h, e);
  hl_free(h, f);
  hl_free(h, g);
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
  hl_heap *h = HEAP("mode=manual", "verify=true");
  char keep_pattern[100];
  memset(keep_pattern, 0x3c, sizeof keep_pattern);
  char *keep = hl_malloc(h, 100);
  CHECK(keep, "malloc");
  memcpy(keep, keep_pattern, sizeof keep_pattern);

  /* small double free: the second one is refused, and the block is not
   * handed out twice */
  char *a = hl_malloc(h, 48);
  hl_free(h, a);
  hl_stats before = stats_of(h);
  hl_free(h, a);
  expect_error(h, "double free", "small double free");
  hl_stats after = stats_of(h);
  CHECK(after.objects_freed == before.objects_freed, "the second free was counted");
  void *b1 = hl_malloc(h, 48), *b2 = hl_malloc(h, 48);
  CHECK(b1 != b2, "one block handed out twice after a double free");

  /* sized double free goes through the same check */
  char *c = hl_malloc(h, 200);
  hl_free_sized(h, c, 200);
  hl_free_sized(h, c, 200);
  expect_error(h, "double free", "sized double free");

  /* large double free */
  char *big = hl_malloc(h, 100000);
  CHECK(big, "large malloc");
  hl_free(h, big);
  hl_free(h, big);
  expect_error(h, "is a freed large block (double free?)", "large double free");

  /* interior pointer of a live block */
  char *d = hl_malloc(h, 64);
  hl_free(h, d + 16);
  char want[128];
  snprintf(want, sizeof want, "free: %p is inside the live block %p (interior pointer)",
           (void *)(d + 16), (void *)d);
  expect_error(h, want, "interior free");
  CHECK(hl_usable_size(h, d) >= 64, "the interior free freed the block");

  /* sized free with a size of another class: refused, block still live */
  hl_free_sized(h, d, 400);
  expect_error(h, "freed with size 400", "wrong size");
  CHECK(hl_usable_size(h, d) >= 64, "the wrongly sized free freed the block");
  hl_free_sized(h, d, 64);
  CHECK(hl_usable_size(h, d) == 0, "the right free did not free the block");

  /* a large block freed with a size of the small path (it was freed), or
   * with more than it holds: refused, block still live */
  char *l = hl_malloc(h, 100000);
  CHECK(l, "large malloc");
  hl_free_sized(h, l, 16);
  expect_error(h, "freed with size 16", "large block, small size");
  CHECK(hl_usable_size(h, l) >= 100000, "a large block freed with size 16 was freed");
  hl_free_sized(h, l, 200000);
  expect_error(h, "freed with size 200000", "large block, size past it");
  CHECK(hl_usable_size(h, l) >= 100000, "a large block freed with size 200000 was freed");
  /* ... or with less than half of it (a large block holds what was asked,
   * up to a quarter more after a realloc, or a shrink to half that stayed):
   * 600 freed it */
  hl_free_sized(h, l, 600);
  expect_error(h, "freed with size 600", "large block, size of the large path's bounds");
  expect_error(h, "from 50000 to 100000", "large block, the bounds said");
  CHECK(hl_usable_size(h, l) >= 100000, "a large block freed with size 600 was freed");
  hl_free_sized(h, l, 49999);
  CHECK(hl_usable_size(h, l) >= 100000, "a large block freed with size 49999 was freed");
  hl_free_sized(h, l, 100000);
  CHECK(hl_usable_size(h, l) == 0, "the right free did not free the large block");
  /* ... and a size of the small path is refused even when it is half the
   * block or more (a large block just past small_max: half of it is a small
   * size) */
  {
    hl_heap *hs = HEAP("mode=manual", "verify=true", "small_max=4096");
    char *m = hl_malloc(hs, 4096 + 512);
    CHECK(m && hl_usable_size(hs, m) >= 4608 && hl_usable_size(hs, m) < 8192, "large malloc: %zu",
          m ? hl_usable_size(hs, m) : 0);
    hl_free_sized(hs, m, 4096);
    expect_error(hs, "freed with size 4096", "large block, a small size past half of it");
    CHECK(hl_usable_size(hs, m) >= 4608, "a large block freed with a small size was freed");
    hl_free_sized(hs, m, 4608);
    CHECK(hl_usable_size(hs, m) == 0, "the right free did not free the large block (%s)",
          hl_heap_error(hs));
    hl_heap_free(hs);
  }
  /* a realloc's slack and an in-place shrink: the sizes asked are accepted */
  char *g = hl_malloc(h, 100000);
  char *g2 = hl_realloc(h, g, 100000, 110000); /* a quarter more: 125,000 */
  CHECK(g2 && hl_usable_size(h, g2) == 125000, "grown: %zu", hl_usable_size(h, g2));
  char *g3 = hl_realloc(h, g2, 110000, 70000); /* stays */
  CHECK(g3 == g2, "a shrink to more than half moved");
  hl_free_sized(h, g3, 70000);
  CHECK(hl_usable_size(h, g3) == 0, "a block shrunk in place not freed with its size (%s)",
        hl_heap_error(h));

  /* realloc of a freed block is refused */
  char *e = hl_malloc(h, 32);
  hl_free(h, e);
  CHECK(hl_realloc(h, e, 32, 40) == NULL, "realloc of a freed block succeeded");
  expect_error(h, "not a live block", "realloc after free");
  CHECK(hl_realloc(h, e, 32, 4000) == NULL, "realloc of a freed block to large succeeded");

  /* a pointer inside the reservation but on a page never carved */
  uint64_t base, bytes;
  OK(h, hl_heap_range(h, &base, &bytes));
  hl_free(h, (void *)(uintptr_t)(base + bytes - 4096));
  expect_error(h, "is in no formatted page of this heap", "free beyond the carved pages");
  /* a pointer inside a live large block: the core said "not a block of this
   * heap" where the preloaded library said what it is */
  char *lg = hl_malloc(h, 100000);
  hl_free(h, lg + 64);
  snprintf(want, sizeof want, "free: %p is inside the live large block %p (100000 bytes)",
           (void *)(lg + 64), (void *)lg);
  expect_error(h, want, "large interior free");
  CHECK(hl_usable_size(h, lg) == 100000, "the interior free freed the large block");
  hl_free(h, lg);

  CHECK(memcmp(keep, keep_pattern, sizeof keep_pattern) == 0, "a live block was damaged");
  check_invariants(h);

  /* use after free: the verifier sees the freed slot's poison broken */
  char *f = hl_malloc(h, 64);
  hl_free(h, f);
  f[40] = 1;
  int rc = hl_heap_check(h);
  CHECK(rc == HL_ECHECK, "a write after free was not detected (%s)", hl_error_name(rc));
  expect_error(h, "written after it was freed", "use after free");
  hl_heap_free(h);
  slot_checks_without_verify();
  puts("manual mode with verify: double, foreign, interior and mis-sized frees are refused");
  return 0;
}
