/* A thread that frees a structure and goes on with other work gives back the
 * blocks its cache kept of the classes it no longer uses (the thread-cache
 * GC, tcache_gc_events; docs/design.md, Manual mode).  Before it, those
 * blocks stayed cached -- and pinned their pages -- until the thread
 * allocated from their class again, exited or flushed: 150 MB of mixed
 * blocks freed by one thread stayed resident, all of it, with 1 MiB pages
 * (docs/clients.md).  Here 200,000 blocks of 16..316 bytes are freed in
 * random order, then the thread churns one 40-byte block; what the caches
 * hold then (small_live_bytes: cached blocks count as used) must be at least
 * 4x less with the GC on than off, and the stats must say the GC ran. */
#include <stdint.h>

#include "check.h"

#define N 200000

/* bytes still cached after the frees and `work` malloc/free pairs */
static uint64_t cached_after(const char *gc, long work, uint64_t *freed, hl_stats *st) {
  hl_heap *h = HEAP("mode=manual", "warm_pages=16", gc);
  void **b = malloc(N * sizeof *b);
  uint64_t x = 0x9e3779b97f4a7c15ull;
  *freed = 0;
  for (size_t i = 0; i < N; i++) {
    size_t n = 16 + xorshift64(&x) % 301;
    b[i] = hl_malloc(h, n);
    CHECK(b[i], "malloc: %s", hl_heap_error(h));
    memset(b[i], 1, n);
    *freed += hl_usable_size(h, b[i]);
  }
  shuffle(b, N, &x); /* free in random order */
  for (size_t i = 0; i < N; i++) hl_free(h, b[i]);
  for (long i = 0; i < work; i++) { /* unrelated work: one class, no refill */
    void *q = hl_malloc(h, 40);
    CHECK(q, "malloc: %s", hl_heap_error(h));
    *(volatile char *)q = 1;
    hl_free(h, q);
  }
  *st = stats_of(h);
  CHECK(st->manual_mallocs == N + (uint64_t)work && st->manual_frees == st->manual_mallocs,
        "%s: %" PRIu64 " mallocs, %" PRIu64 " frees counted for %" PRIu64 " each", gc,
        st->manual_mallocs, st->manual_frees, N + (uint64_t)work);
  free(b);
  hl_heap_free(h);
  return st->small_live_bytes;
}

int main(void) {
  uint64_t freed;
  hl_stats off_st, on_st, def_st;
  uint64_t off = cached_after("tcache_gc_events=0", 50000, &freed, &off_st);
  uint64_t on = cached_after("tcache_gc_events=256", 50000, &freed, &on_st);
  printf("freed %.1f MiB; cached after 50,000 pairs: GC off %.1f KiB, every 256 events %.1f KiB"
         " (%" PRIu64 " visits, %.1f KiB given back)\n",
         freed / 1048576.0, off / 1024.0, on / 1024.0, on_st.tcache_gc_visits,
         on_st.tcache_gc_bytes / 1024.0);
  CHECK(off_st.tcache_gc_visits == 0 && off_st.tcache_gc_bytes == 0,
        "tcache_gc_events=0: %" PRIu64 " visits", off_st.tcache_gc_visits);
  CHECK(off > 64 * 1024, "with the GC off the caches kept only %" PRIu64 " bytes", off);
  CHECK(on_st.tcache_gc_visits > 0 && on_st.tcache_gc_flushes > 0 && on_st.tcache_gc_bytes > 0,
        "the GC did not run: %" PRIu64 " visits, %" PRIu64 " flushes",
        on_st.tcache_gc_visits, on_st.tcache_gc_flushes);
  CHECK(on * 4 <= off, "the GC left %" PRIu64 " bytes cached of %" PRIu64 " without it", on, off);
  /* the default clock (4096), with the work that many more events */
  uint64_t def = cached_after("tcache_blocks=1024", 800000, &freed, &def_st);
  printf("default tcache_gc_events, 800,000 pairs: %.1f KiB cached (%" PRIu64 " visits)\n",
         def / 1024.0, def_st.tcache_gc_visits);
  CHECK(def * 4 <= off, "default: the GC left %" PRIu64 " bytes cached of %" PRIu64, def, off);
  return 0;
}
