/* Bounds and counters exact to the unit: each check here is a mutant of the
 * twenty-fifth session's mutation hunt that every other test let live (an
 * off-by-one at a bound, a counter not kept, a window not reset), kept as
 * the smallest program that tells the code from the mutant.
 *   - hl_error_name of a code past the last is "UNKNOWN" (read past the
 *     table: a crash);
 *   - a 0-byte read or write at the end of a payload, or of an empty
 *     object, is no range error;
 *   - a manual heap hands out exactly heap_limit_bytes, with and without
 *     its thread cache (a refill overshot the limit by half);
 *   - the 512-byte class exists (malloc(500) usable 512);
 *   - a sampler's reset and mark start new windows: the maxima before are
 *     gone;
 *   - upgrade_calls counts the upgrade calls;
 *   - a trigger that is an exact multiple of the slot size starts the cycle
 *     at the object that reaches it;
 *   - each trim that gives up doubles the back-off: 100, 200, 400 ms...;
 *   - sub-page release: a trim's budget (release_per_sweep) covers whole
 *     and sub-page releases together; a free run of exactly one OS page is
 *     given back; under verify, a free slot straddling out of a released OS
 *     page is whole again once it is restored. */
#include <sys/mman.h>

#include "check.h"

static void error_names(void) {
  for (int c = HL_ERROR_COUNT; c <= HL_ERROR_COUNT + 1; c++)
    CHECK(strcmp(hl_error_name(c), "UNKNOWN") == 0, "hl_error_name(%d) = %s", c,
          hl_error_name(c));
  CHECK(strcmp(hl_error_name(-1), "UNKNOWN") == 0, "hl_error_name(-1) = %s", hl_error_name(-1));
}

static void payload_ends(void) {
  hl_heap *h = HEAP("mode=collected");
  hl_ref r, e;
  char c = 0;
  OK(h, hl_alloc(h, 32, 0, &r));
  OK(h, hl_ref_write(h, r, 32, &c, 0));
  OK(h, hl_ref_read(h, r, 32, &c, 0));
  OK(h, hl_alloc(h, 0, 0, &e));
  OK(h, hl_ref_write(h, e, 0, "", 0));
  OK(h, hl_ref_read(h, e, 0, &c, 0));
  FAILS(h, HL_ERANGE, "", hl_ref_read(h, r, 33, &c, 0));
  hl_heap_free(h);
}

static void manual_limit(const char *cache, size_t size, int want) {
  hl_heap *h = HEAP("mode=manual", cache, "heap_limit_bytes=65536");
  int n = 0;
  while (n < 100000 && hl_malloc(h, size)) n++;
  if (want) {
    CHECK(n == want, "%s, heap_limit_bytes=65536: %d blocks of %zu (want %d)", cache, n, size,
          want);
  } else {
    CHECK(n * size <= 65536 && n * size >= 65536 * 9 / 10,
          "%s, heap_limit_bytes=65536: %d blocks of %zu, %zu bytes", cache, n, size, n * size);
  }
  hl_heap_free(h);
}

static void class_512(void) {
  hl_heap *h = HEAP("mode=manual", "small_max=4096");
  for (size_t ask = 497; ask <= 512; ask += 15) {
    void *p = hl_malloc(h, ask);
    CHECK(p && hl_usable_size(h, p) == 512, "malloc(%zu): usable %zu", ask, hl_usable_size(h, p));
    hl_free(h, p);
  }
  hl_heap_free(h);
}

static void sampler_windows(void) {
  hl_sampler *s;
  CHECK(hl_sampler_open(&s, 0.01, 1024) == HL_OK, "%s", hl_heap_error(NULL));
  size_t n = (size_t)128 << 20;
  hl_sampler_summary a, b;
  OK(NULL, hl_sampler_mark(s));
  char *big = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(big != MAP_FAILED, "mmap");
  memset(big, 1, n);
  OK(NULL, hl_sampler_mark(s)); /* (a sample now: the 128 MiB in it) */
  OK(NULL, hl_sampler_summary_get(s, &a));
  CHECK(a.max_phys >= n && a.max_phys_after_mark >= n, "max_phys %.1f, after mark %.1f MiB",
        a.max_phys / MiB, a.max_phys_after_mark / MiB);
  munmap(big, n);
  OK(NULL, hl_sampler_mark(s));
  OK(NULL, hl_sampler_summary_get(s, &b));
  CHECK(b.max_phys_after_mark + n / 2 < a.max_phys_after_mark,
        "a new mark kept the old window's maximum: %.1f MiB", b.max_phys_after_mark / MiB);
  OK(NULL, hl_sampler_reset(s));
  OK(NULL, hl_sampler_summary_get(s, &b));
  CHECK(b.max_phys + n / 2 < a.max_phys && b.max_rss + n / 2 < a.max_rss,
        "a reset kept the old phase's maxima: phys %.1f, rss %.1f MiB", b.max_phys / MiB,
        b.max_rss / MiB);
  hl_sampler_stop(s);
}

static void upgrade_calls(void) {
  hl_heap *h = HEAP("warm_pages=0", "release_per_sweep=1048576", "upgrade_per_sweep=1024");
  hl_ref r;
  OK(h, hl_fill(h, 8u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, 12 /* ENOMEM: the fallback */));
  OK(h, hl_collect(h, 2, -1));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
  OK(h, hl_trim(h));
  hl_stats s = stats_of(h);
  CHECK(s.upgraded_pages > 0 && s.upgrade_calls >= 1 && s.upgrade_calls <= s.upgrade_attempts,
        "upgraded %" PRIu64 " pages in %" PRIu64 " calls (%" PRIu64 " attempts)",
        s.upgraded_pages, s.upgrade_calls, s.upgrade_attempts);
  hl_heap_free(h);
}

static void trigger_at_a_multiple(void) {
  hl_heap *h = HEAP("gc_trigger_bytes=4194336"); /* 87,382 x 48 */
  hl_stats a = stats_of(h);
  uint64_t n = a.gc_trigger_bytes / 48 + 1;
  hl_enter(h);
  for (uint64_t i = 0; i < n; i++) CHECK(hl_obj_new(h, 40, 0), "alloc"); /* the 48-byte class */
  hl_leave(h);
  CHECK(stats_of(h).cycles > a.cycles, "no cycle after %" PRIu64 " objects of 48 bytes past a "
        "trigger of %" PRIu64, n, a.gc_trigger_bytes);
  hl_heap_free(h);
}

static void backoff_doubles(void) {
  hl_heap *h = HEAP("mode=manual", "warm_pages=0", "warm_demand_trims=0", "syscall_retry_max=2",
                    "syscall_retry_backoff_us=100", "tcache_blocks=0");
  static void *b[2000];
  for (int i = 0; i < 2000; i++) CHECK((b[i] = hl_malloc(h, 256)), "malloc");
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, 11 /* EAGAIN */));
  for (int i = 0; i < 2000; i++) hl_free(h, b[i]);
  uint64_t first = stats_of(h).trim_backoff_ns; /* (the frees' own trims may have given up) */
  for (int t = 1; t <= 4; t++) {
    OK(h, hl_trim(h));
    uint64_t now = stats_of(h).trim_backoff_ns;
    CHECK(now == (first ? first : 50000000ull) << t || now == 10000000000ull,
          "trim %d: back-off %" PRIu64 " ms after %" PRIu64 " ms", t, now / 1000000,
          first / 1000000);
  }
  hl_heap_free(h);
}

static void subpage_budget(void) {
  hl_heap *h = HEAP("mode=manual", "subpage_release=true", "warm_pages=0", "tcache_blocks=0",
                    "release_per_sweep=2", "warm_demand_trims=0");
  enum { N = 256 * 7 }; /* seven 64 KiB pages of 256-byte slots */
  static void *b[N];
  for (int i = 0; i < N; i++) CHECK((b[i] = hl_malloc(h, 256)), "malloc");
  hl_stats a = stats_of(h);
  for (int i = 0; i < 512; i++) hl_free(h, b[i]); /* pages 0 and 1: empty */
  for (int pg = 2; pg < 5; pg++)
    for (int i = 16; i < 32; i++) hl_free(h, b[pg * 256 + i]); /* an OS page of pages 2..4 */
  hl_stats f = stats_of(h);
  OK(h, hl_trim(h));
  hl_stats s = stats_of(h);
  uint64_t whole = s.released_pages - f.released_pages, sub = s.subpage_pages - f.subpage_pages;
  CHECK(whole + sub <= 2, "one trim with release_per_sweep=2 released %" PRIu64 " whole pages "
        "and %" PRIu64 " in part", whole, sub);
  (void)a;
  hl_heap_free(h);
}

static void subpage_one_os_page(void) {
  hl_heap *h = HEAP("mode=manual", "subpage_release=true", "warm_pages=0", "tcache_blocks=0");
  enum { N = 512 }; /* two 64 KiB pages of 256-byte slots: the first is not the owned one */
  static void *b[N];
  for (int i = 0; i < N; i++) {
    CHECK((b[i] = hl_malloc(h, 256)), "malloc");
    memset(b[i], 1, 256);
  }
  for (int i = 16; i < 32; i++) hl_free(h, b[i]); /* exactly OS page 1 of the page */
  OK(h, hl_trim(h));
  check_invariants(h);
  hl_stats s = stats_of(h);
  CHECK(s.subpage_released_bytes == 4096 && s.subpage_runs == 1,
        "a free run of exactly one OS page: %" PRIu64 " bytes in %" PRIu64 " runs released",
        s.subpage_released_bytes, s.subpage_runs);
  hl_heap_free(h);
}

static void subpage_straddler_under_verify(void) {
  /* 240-byte slots: OS page 1 ([4096, 8192)) holds slots 17..34; slot 34
   * reaches into OS page 2 */
  hl_heap *h = HEAP("mode=manual", "subpage_release=true", "warm_pages=0", "tcache_blocks=0",
                    "verify=true");
  enum { N = 600 }; /* > 2 pages of 273 slots: page 0 is not the owned page */
  static void *b[N];
  for (int i = 0; i < N; i++) {
    CHECK((b[i] = hl_malloc(h, 240)), "malloc");
    memset(b[i], 0x5A, 240);
  }
  for (int i = 17; i <= 34; i++) hl_free(h, b[i]);
  /* (verify's quarantine holds the last 256 blocks freed: 256 others push
   * them out, back to their page) */
  static void *other[256];
  for (int i = 0; i < 256; i++) CHECK((other[i] = hl_malloc(h, 32)), "malloc");
  for (int i = 0; i < 256; i++) hl_free(h, other[i]);
  OK(h, hl_trim(h));
  CHECK(stats_of(h).subpage_released_bytes > 0, "nothing released inside the page");
  OK(h, hl_heap_check(h));
  void *p = hl_malloc(h, 240); /* the lowest free slot, 17: OS page 1 comes back */
  CHECK(p != NULL && stats_of(h).subpage_restores > 0, "no restore");
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

int main(void) {
  error_names();
  payload_ends();
  manual_limit("tcache_blocks=0", 1024, 64);
  manual_limit("tcache_blocks=256", 64, 0);
  class_512();
  sampler_windows();
  upgrade_calls();
  trigger_at_a_multiple();
  backoff_doubles();
  subpage_budget();
  subpage_one_os_page();
  subpage_straddler_under_verify();
  puts("bounds and counters exact");
  return 0;
}
