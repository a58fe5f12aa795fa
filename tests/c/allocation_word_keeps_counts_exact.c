/* A size class allocates from a word of free slots it reserved on its owned
 * page (hl_aword): the page counts and the stats charge the whole word at
 * once and a flush gives back what was not taken.  Checked here at every
 * point a word can be part-used -- after each allocation, whatever reads the
 * counts (stats, the heap check, a cycle) sees them exact, no slot is handed
 * out twice, and nothing live is lost:
 *   - collected: raw objects rooted on a shadow stack, reads interleaved
 *     with allocations, holes made by a collection refilled from the words
 *     that straddle bump;
 *   - manual: hl_malloc / hl_free with the thread cache off, the same reads. */
#include "check.h"
#include "internal.h"

#define N 700 /* several words and pages (4 KiB pages: 85 slots of 48 bytes) */

static void *shadow[N];

static uint64_t value_of(uint64_t i, uint64_t gen) { return i * 2654435761u + gen; }

static void check_all(const char *when, uint64_t gen_of[N]) {
  for (int i = 0; i < N; i++) {
    if (!shadow[i]) continue;
    CHECK(*(uint64_t *)hl_obj_data(shadow[i]) == value_of((uint64_t)i, gen_of[i]),
          "%s: object %d lost its payload", when, i);
    for (int j = 0; j < i; j++)
      CHECK(shadow[j] != shadow[i], "%s: objects %d and %d share a slot", when, j, i);
  }
}

static void collected(void) {
  hl_heap *h = HEAP("page_size=4k", "page_release=false", "verify=true");
  OK(h, hl_roots_add(h, shadow, N, 0));
  static uint64_t gen_of[N];
  hl_stats s0 = stats_of(h);
  uint64_t sz = 0;
  hl_enter(h);
  for (int i = 0; i < N; i++) {
    /* 8-byte header + 1 slot + 32-byte payload: the 48-byte class */
    shadow[i] = hl_obj_new(h, 32, 1);
    CHECK(shadow[i], "alloc %d: %s", i, hl_heap_error(h));
    *(uint64_t *)hl_obj_data(shadow[i]) = value_of((uint64_t)i, 0);
    hl_stats s = stats_of(h);
    uint64_t n = s.objects_allocated - s0.objects_allocated;
    CHECK(n == (uint64_t)i + 1, "after %d allocations the stats count %" PRIu64, i + 1, n);
    if (!sz) sz = s.small_allocated_bytes - s0.small_allocated_bytes;
    CHECK(s.small_allocated_bytes - s0.small_allocated_bytes == n * sz,
          "after %" PRIu64 " allocations: %" PRIu64 " bytes of %" PRIu64 "-byte slots", n,
          s.small_allocated_bytes - s0.small_allocated_bytes, sz);
    CHECK(s.small_bytes_since_cycle == n * sz, "since cycle %" PRIu64, s.small_bytes_since_cycle);
    if (i % 7 == 3) OK(h, hl_heap_check(h)); /* a flush in the middle of a word */
  }
  CHECK(sz == 48, "the class is %" PRIu64 " bytes, not 48", sz);
  check_all("filled", gen_of);

  /* holes: every third object dropped, a collection, then refilled -- the
   * refill's words are the holes below bump, interleaved with more reads */
  for (int round = 1; round <= 3; round++) {
    for (int i = round % 3; i < N; i += 3) shadow[i] = NULL;
    hl_leave(h);
    OK(h, hl_collect(h, 1, 1));
    hl_enter(h);
    hl_stats a = stats_of(h);
    for (int i = round % 3; i < N; i += 3) {
      shadow[i] = hl_obj_new(h, 32, 1);
      CHECK(shadow[i], "refill %d: %s", i, hl_heap_error(h));
      gen_of[i] = (uint64_t)round;
      *(uint64_t *)hl_obj_data(shadow[i]) = value_of((uint64_t)i, gen_of[i]);
      if (i % 5 == 0) {
        hl_leave(h);
        OK(h, hl_collect(h, 1, i % 2)); /* a cycle with words part-used */
        hl_enter(h);
      }
    }
    hl_stats b = stats_of(h);
    CHECK(b.total_pages == a.total_pages,
          "round %d: refilling the holes took %" PRIu64 " new pages", round,
          b.total_pages - a.total_pages);
    check_all("refilled", gen_of);
    OK(h, hl_heap_check(h));
  }
  hl_leave(h);
  OK(h, hl_collect(h, 1, 1));
  hl_stats s = stats_of(h);
  CHECK(s.small_live_bytes == (uint64_t)N * sz, "live %" PRIu64 " bytes, %d objects of %" PRIu64,
        s.small_live_bytes, N, sz);
  CHECK(s.verify_failures == 0, "verify failures %" PRIu64, s.verify_failures);
  hl_heap_free(h);
}

static void manual(void) {
  hl_heap *h = HEAP("mode=manual", "page_size=4k", "tcache_blocks=0", "verify=true");
  static void *b[N];
  hl_stats s0 = stats_of(h);
  for (int i = 0; i < N; i++) {
    b[i] = hl_malloc(h, 40);
    CHECK(b[i], "malloc %d: %s", i, hl_heap_error(h));
    memset(b[i], i & 0xff, 40);
    hl_stats s = stats_of(h);
    CHECK(s.objects_allocated - s0.objects_allocated == (uint64_t)i + 1,
          "after %d mallocs the stats count %" PRIu64, i + 1,
          s.objects_allocated - s0.objects_allocated);
    CHECK(s.small_live_bytes - s0.small_live_bytes == (uint64_t)(i + 1) * 48,
          "after %d mallocs live %" PRIu64, i + 1, s.small_live_bytes - s0.small_live_bytes);
    if (i % 3 == 0) {
      hl_free(h, b[i / 2]); /* a hole behind the word in use */
      b[i / 2] = NULL;
      s0.small_live_bytes -= 48;
      OK(h, hl_heap_check(h));
    }
  }
  for (int i = 0; i < N; i++) {
    if (!b[i]) continue;
    for (int k = 0; k < 40; k++)
      CHECK(((uint8_t *)b[i])[k] == (i & 0xff), "block %d byte %d changed", i, k);
    hl_free(h, b[i]);
  }
  OK(h, hl_heap_check(h));
  hl_stats s = stats_of(h);
  CHECK(s.small_live_bytes == 0, "live %" PRIu64 " after every block was freed",
        s.small_live_bytes);
  hl_heap_free(h);
}

int main(void) {
  collected();
  manual();
  return 0;
}
