/* With verify on, a manual heap holds freed blocks back in a quarantine
 * (256 blocks or 64 MiB, small and large): a freed block is not handed out
 * again until it leaves, so a stale second free is refused as a double free
 * instead of freeing the live block the next malloc made at its address.
 * The freed small slot went below its page's cursor and was the very next
 * one handed out: free(p), q = malloc() == p, free(p) freed q (and r =
 * malloc() == q); a large block's second free freed the live block the
 * system allocator had put at its address (large_objects 0 with it live).
 * The verify hunt, session 29. */
#include "check.h"

static void expect_error(hl_heap *h, const char *needle, const char *what) {
  CHECK(strstr(hl_heap_error(h), needle), "%s: message '%s' does not mention '%s'", what,
        hl_heap_error(h), needle);
}

int main(void) {
  hl_heap *h = HEAP("mode=manual", "verify=true");
  char *keep = hl_malloc(h, 40);
  CHECK(keep, "malloc");

  /* small: free(p), q = malloc, free(p) again */
  char *p = hl_malloc(h, 40);
  hl_stats before = stats_of(h);
  hl_free(h, p);
  hl_stats after = stats_of(h);
  CHECK(after.small_live_bytes + 48 == before.small_live_bytes,
        "a quarantined block counts as live (%" PRIu64 " -> %" PRIu64 ")", before.small_live_bytes,
        after.small_live_bytes);
  CHECK(hl_usable_size(h, p) == 0, "a freed block has a usable size");
  char *q = hl_malloc(h, 40);
  CHECK(q && q != p, "the freed block was handed out again at once (%p)", (void *)q);
  strcpy(q, "live data of q");
  hl_free(h, p);
  expect_error(h, "is a freed block (double free?)", "stale double free");
  char *r = hl_malloc(h, 40);
  CHECK(r != q && r != p, "a block handed out twice");
  CHECK(strcmp(q, "live data of q") == 0, "the live block was damaged");
  CHECK(hl_usable_size(h, q) == 48, "the live block was freed");
  CHECK(hl_realloc(h, p, 0, 100) == NULL, "realloc of a quarantined block");
  hl_free_sized(h, p, 40);
  expect_error(h, "is a freed block (double free?)", "sized double free");

  /* large: free(L), M = malloc, free(L) again */
  char *L = hl_malloc(h, 100000);
  hl_free(h, L);
  char *M = hl_malloc(h, 100000);
  CHECK(M && M != L, "the freed large block's address was handed out again");
  hl_free(h, L);
  expect_error(h, "is a freed large block (double free?)", "large stale double free");
  CHECK(stats_of(h).large_objects == 1 && hl_usable_size(h, M) >= 100000, "the live M was freed");
  memset(M, 1, 100000);
  CHECK(hl_realloc(h, L, 0, 200000) == NULL, "realloc of a quarantined large block");
  expect_error(h, "realloc:", "large realloc");
  expect_error(h, "is a freed large block", "large realloc");

  /* a large block realloc moves goes into the quarantine as a free puts it
   * (the system realloc freed it past it) */
  char *B = hl_malloc(h, 200000), *fence = hl_malloc(h, 200000);
  char *G = hl_realloc(h, B, 200000, 800000);
  CHECK(G && G != B, "realloc moved nothing");
  hl_free(h, B);
  expect_error(h, "is a freed large block (double free?)", "free after a moving realloc");
  check_invariants(h);

  /* the block leaves after 256 more: a write into it is found then */
  char *e = hl_malloc(h, 64);
  hl_free(h, e);
  e[30] = 'X';
  FAILS(h, HL_ECHECK, "in verify's quarantine) was written after it was freed", hl_heap_check(h));
  for (int i = 0; i < 300; i++) hl_free(h, hl_malloc(h, 64));
  CHECK(stats_of(h).verify_failures == 1, "the damaged block left unseen");
  expect_error(h, "quarantine: free block", "leaving the quarantine");
  check_invariants(h);
  hl_free(h, fence);
  hl_free(h, G);
  hl_free(h, M);
  hl_free(h, keep);
  hl_heap_free(h); /* (the large blocks held go back: ASan's leak check) */
  puts("manual verify: freed blocks are quarantined; a stale double free is refused");
  return 0;
}
