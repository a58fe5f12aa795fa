/* With verify on, a manual heap checks a free block before it hands it out
 * (hl_malloc, hl_calloc, hl_realloc's new block): a write after free, or an
 * overflow of the block before it into it, broke its seal or its poison.
 * The heap's error names the block, its class, the offset and the block
 * before it, verify_failures counts it and a verify_failed event names the
 * block; the block is handed out all the same.  Nothing ran a check in a program (the launchers, the preloaded
 * library): the damaged block was handed out unseen (the verify hunt,
 * session 29).  Without verify nothing is checked. */
#include "check.h"

static uint64_t failures(hl_heap *h) { return stats_of(h).verify_failures; }

int main(void) {
  hl_heap *h = HEAP("mode=manual", "verify=true");
  char want[256];

  /* an overflow of a live block into the fresh slot after it (poison) */
  char *a = hl_malloc(h, 48);
  CHECK(a, "malloc");
  memset(a, 'A', 60);
  char *b = hl_malloc(h, 48);
  CHECK(b == a + 48, "the next slot: %p after %p", (void *)b, (void *)a);
  CHECK(failures(h) == 1, "the overflow was not caught (%" PRIu64 ")", failures(h));
  snprintf(want, sizeof want, "verify: malloc: free block %p (class 48 bytes) was written after "
           "it was freed, at offset 0 (or an overflow of the block before it, %p)", (void *)b,
           (void *)a);
  CHECK(strcmp(hl_heap_error(h), want) == 0, "message '%s', not '%s'", hl_heap_error(h), want);
  {
    static hl_event ev[256];
    size_t n = 0, k = 0;
    OK(h, hl_events_read(h, ev, 256, &n, 1));
    for (size_t i = 0; i < n; i++)
      if (ev[i].kind == HL_EV_verify_failed) {
        CHECK(ev[i].fields[0] == (int64_t)(uintptr_t)b && ev[i].fields[1] == 1 && ev[i].fields[2] == 0,
              "verify_failed event: address %" PRId64 " failures %" PRId64 " in_cycle %" PRId64,
              ev[i].fields[0], ev[i].fields[1], ev[i].fields[2]);
        k++;
      }
    CHECK(k == 1, "%zu verify_failed events for one damaged block", k);
  }

  /* calloc: the same check, named */
  char *c = hl_malloc(h, 32);
  memset(c + 32, 1, 4);
  char *d = hl_calloc(h, 1, 32);
  CHECK(d == c + 32 && failures(h) == 2, "calloc: not caught (%" PRIu64 ")", failures(h));
  CHECK(strstr(hl_heap_error(h), "calloc: free block") && strstr(hl_heap_error(h), "at offset 0"),
        "calloc: '%s'", hl_heap_error(h));
  CHECK(d[0] == 0 && d[3] == 0, "calloc's block not zeroed");

  /* a write after free: caught when the block is next handed out (or leaves
   * the quarantine) */
  char *keep = hl_malloc(h, 64), *e = hl_malloc(h, 64);
  (void)keep;
  hl_free(h, e);
  memset(e + 20, 'X', 8);
  for (int i = 0; i < 2000 && failures(h) == 2; i++) hl_free(h, hl_malloc(h, 64));
  CHECK(failures(h) == 3, "a write after free was not caught (%" PRIu64 ")", failures(h));
  snprintf(want, sizeof want, "free block %p (class 64 bytes) was written after it was freed, "
           "at offset 8 or past it", (void *)e);
  CHECK(strstr(hl_heap_error(h), want), "message '%s' lacks '%s'", hl_heap_error(h), want);
  hl_heap_free(h);

  /* without verify: trusted */
  h = HEAP("mode=manual", "verify=false");
  a = hl_malloc(h, 48);
  memset(a, 'A', 60);
  CHECK(hl_malloc(h, 48) && failures(h) == 0, "checked without verify");
  hl_heap_free(h);
  puts("manual verify: a damaged free block is reported when it is handed out");
  return 0;
}
