/* Huge pages (thp, issue 19): the reservation is carved in 2 MiB-aligned
 * chunks; a trim releases whole chunks first with one call over each run of
 * them -- the chunk's already released pages included -- and counts
 * (thp_splits, event thp_split) every chunk it releases in part; thp=populate
 * faults a fresh chunk in with one call, and a refusal is recorded (its
 * errno in thp_errno) while the heap goes on with ordinary faults.
 * subpage_release inside a huge chunk splits it too (64 KiB, or one 4 KiB
 * OS page, of a huge page): counted and told as a split like the others,
 * and AnonHugePages drops by as many chunks as the heap counts.
 *
 * The chunk accounting does not depend on the kernel giving huge pages: the
 * checks of AnonHugePages run only where thp_enabled says it does. */
#include <errno.h>

#include "check.h"

#define CHUNK ((uint64_t)2 << 20)

static uint64_t chunk_of(hl_heap *h, const void *p) {
  uint64_t base, bytes;
  OK(h, hl_heap_range(h, &base, &bytes));
  return ((uint64_t)(uintptr_t)p - base) / CHUNK;
}

/* Drop the fill's objects except one page's worth per chunk (root slot i =
 * the objects of the fill's i-th page).  Returns the chunks kept. */
static uint64_t keep_one_page_per_chunk(hl_heap *h, hl_ref r, uint64_t *kept_chunks) {
  hl_object_info info;
  OK(h, hl_ref_info(h, r, &info));
  uint8_t seen[256] = {0};
  uint64_t kept = 0;
  hl_enter(h); /* raw pointers: no cycle while they are read */
  void *root = (void *)(uintptr_t)info.object;
  for (uint64_t i = 0; i < hl_obj_refs(root); i++) {
    void *n = hl_obj_get(root, i);
    if (!n) continue;
    void *leaf = n;
    while (hl_obj_refs(leaf)) leaf = hl_obj_get(leaf, 0);
    uint64_t c = chunk_of(h, leaf);
    CHECK(c < sizeof seen, "chunk %" PRIu64, c);
    if (!seen[c]) {
      seen[c] = 1;
      kept++;
    } else {
      hl_obj_set(root, i, NULL);
    }
  }
  hl_leave(h);
  *kept_chunks = kept;
  return kept;
}

static void splits_then_whole_chunks(void) {
  hl_heap *h = HEAP("thp=madvise", "warm_pages=0", "warm_demand_trims=0",
                    "release_per_sweep=1048576", "verify=1");
  hl_stats s = stats_of(h);
  uint64_t base, bytes;
  OK(h, hl_heap_range(h, &base, &bytes));
  CHECK(base % CHUNK == 0 && bytes % CHUNK == 0, "reservation %#" PRIx64 " + %" PRIu64
        " is not carved in 2 MiB chunks", base, bytes);
  uint64_t vmas;
  OK(h, hl_vma_count(h, &vmas));
  CHECK(vmas == 1, "the aligned reservation is %" PRIu64 " VMAs", vmas);

  hl_ref r;
  OK(h, hl_fill(h, 16u << 20, 256, 0, &r));
  hl_footprint f;
  OK(h, hl_footprint_get(&f));
  if (s.thp_enabled) {
    CHECK(f.anon_huge >= 12u << 20, "thp on, yet AnonHugePages is %.1f MiB after a 16 MiB fill",
          f.anon_huge / MiB);
  }

  /* 1: one page kept per chunk: every chunk is released in part -> splits */
  uint64_t kept;
  keep_one_page_per_chunk(h, r, &kept);
  CHECK(kept >= 8, "the fill covered %" PRIu64 " chunks", kept);
  hl_event ev[256];
  size_t n;
  OK(h, hl_events_read(h, ev, 256, &n, 1));
  OK(h, hl_collect(h, 2, 1));
  OK(h, hl_heap_check(h));
  hl_stats a = stats_of(h);
  CHECK(a.released_pages > 0, "nothing released");
  CHECK(a.thp_chunks_released == 0, "%" PRIu64 " chunks released whole, none was free",
        a.thp_chunks_released);
  CHECK(a.thp_splits >= kept - 1 && a.thp_splits <= kept + 2,
        "%" PRIu64 " splits for %" PRIu64 " chunks each released in part", a.thp_splits, kept);
  OK(h, hl_events_read(h, ev, 256, &n, 1));
  uint64_t split_events = 0;
  for (size_t i = 0; i < n; i++) {
    if (ev[i].kind != HL_EV_thp_split) continue;
    split_events++;
    CHECK(ev[i].fields[0] % (int64_t)(CHUNK / 65536) == 0, "chunk_page %" PRId64,
          ev[i].fields[0]);
    CHECK(ev[i].fields[1] >= 1 && ev[i].fields[2] >= 1 && ev[i].fields[1] + ev[i].fields[2] <= 32,
          "released_pages %" PRId64 ", pages_in_use %" PRId64, ev[i].fields[1], ev[i].fields[2]);
    CHECK(ev[i].fields[3] == ev[i].fields[1] * 65536, "released_bytes %" PRId64 " for %" PRId64
          " pages", ev[i].fields[3], ev[i].fields[1]);
  }
  CHECK(split_events == a.thp_splits, "%" PRIu64 " thp_split events for %" PRIu64 " splits",
        split_events, a.thp_splits);

  /* 2: the rest dropped: every chunk is whole now (its other pages already
   * released) and goes back with one call per run of chunks */
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 2, 1));
  OK(h, hl_heap_check(h));
  hl_stats b = stats_of(h);
  uint64_t whole = b.thp_chunks_released - a.thp_chunks_released;
  CHECK(whole >= kept - 1, "%" PRIu64 " chunks released whole of %" PRIu64, whole, kept);
  CHECK(b.release_calls - a.release_calls <= 3,
        "%" PRIu64 " calls for %" PRIu64 " adjacent whole chunks: not one call per run",
        b.release_calls - a.release_calls, whole);
  CHECK(b.thp_splits - a.thp_splits <= 1, "%" PRIu64 " more splits (the last, partly carved "
        "chunk at most)", b.thp_splits - a.thp_splits);
  CHECK(b.released_pages >= b.total_pages - 32, "released %" PRIu64 " of %" PRIu64 " pages",
        b.released_pages, b.total_pages);
  uint64_t res = resident_of(h);
  CHECK(res <= CHUNK, "%.1f MiB still resident", res / MiB);

  /* 3: the heap takes its chunks back and releases them again */
  OK(h, hl_fill(h, 8u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 2, 1));
  OK(h, hl_heap_check(h));
  hl_stats c = stats_of(h);
  CHECK(c.thp_chunks_released > b.thp_chunks_released, "reused chunks not released whole");
  printf("split %" PRIu64 " chunks, then %" PRIu64 " whole in %" PRIu64 " calls; "
         "AnonHugePages after the fill %.1f MiB (thp_enabled %" PRIu64 ")\n",
         a.thp_splits, whole, b.release_calls - a.release_calls, f.anon_huge / MiB,
         s.thp_enabled);
  hl_heap_free(h);
}

/* subpage_release: pages that keep a few live slots give back the OS pages
 * between them -- inside a chunk the kernel backs with one huge page, that
 * splits it.  No page here is empty (a stride fill keeps one object in 64,
 * four per page), so every split is the sub-page release's. */
static void subpage_release_splits_are_counted(void) {
  hl_heap *h = HEAP("thp=madvise", "subpage_release=1", "warm_pages=0", "warm_demand_trims=0",
                    "release_per_sweep=1048576", "verify=1");
  hl_ref r;
  OK(h, hl_fill_stride(h, 16u << 20, 248, 0, 64, &r)); /* 248 + 8: the 256-byte class */
  hl_footprint f0, f1;
  OK(h, hl_footprint_get(&f0));
  hl_stats s0 = stats_of(h);
  hl_event ev[256];
  size_t n;
  OK(h, hl_events_read(h, ev, 256, &n, 1));
  OK(h, hl_collect(h, 2, 1));
  OK(h, hl_heap_check(h));
  OK(h, hl_footprint_get(&f1));
  hl_stats s = stats_of(h);
  uint64_t chunks = s.total_pages / 32; /* 64 KiB pages, the last chunk partly carved */
  CHECK(s.released_pages == 0, "%" PRIu64 " whole pages released: none was empty",
        s.released_pages);
  CHECK(s.subpage_released_bytes >= 8u << 20, "%.1f MiB released inside pages",
        s.subpage_released_bytes / MiB);
  CHECK(s.thp_splits >= chunks && s.thp_splits <= chunks + 1,
        "%" PRIu64 " splits counted for %" PRIu64 " chunks each released in part "
        "(%.1f MiB of OS pages inside them)", s.thp_splits, chunks,
        s.subpage_released_bytes / MiB);
  CHECK(s.thp_subpage_splits == s.thp_splits, "%" PRIu64 " of %" PRIu64 " splits by sub-page "
        "release", s.thp_subpage_splits, s.thp_splits);
  OK(h, hl_events_read(h, ev, 256, &n, 1));
  uint64_t split_events = 0, bytes = 0;
  for (size_t i = 0; i < n; i++) {
    if (ev[i].kind != HL_EV_thp_split) continue;
    split_events++;
    bytes += (uint64_t)ev[i].fields[3];
    CHECK(ev[i].fields[0] % (int64_t)(CHUNK / 65536) == 0, "chunk_page %" PRId64,
          ev[i].fields[0]);
    CHECK(ev[i].fields[1] == 0 && ev[i].fields[2] >= 1 && ev[i].fields[2] <= 32,
          "released_pages %" PRId64 ", pages_in_use %" PRId64, ev[i].fields[1], ev[i].fields[2]);
    CHECK(ev[i].fields[3] >= 4096 && ev[i].fields[3] % 4096 == 0 &&
              ev[i].fields[3] < (int64_t)CHUNK,
          "released_bytes %" PRId64, ev[i].fields[3]);
  }
  CHECK(split_events == s.thp_splits, "%" PRIu64 " thp_split events for %" PRIu64 " splits",
        split_events, s.thp_splits);
  CHECK(bytes == s.subpage_released_bytes, "the split events tell %" PRIu64 " bytes, %" PRIu64
        " were released", bytes, s.subpage_released_bytes);
  if (s0.thp_enabled) {
    /* the kernel agrees: that many huge pages are gone from AnonHugePages */
    CHECK(f0.anon_huge >= f1.anon_huge + (s.thp_splits - 1) * CHUNK,
          "AnonHugePages %.1f -> %.1f MiB for %" PRIu64 " splits", f0.anon_huge / MiB,
          f1.anon_huge / MiB, s.thp_splits);
  }
  printf("sub-page release: %" PRIu64 " splits of %" PRIu64 " chunks, %.1f MiB released; "
         "AnonHugePages %.1f -> %.1f MiB\n", s.thp_splits, chunks,
         s.subpage_released_bytes / MiB, f0.anon_huge / MiB, f1.anon_huge / MiB);
  hl_heap_free(h);
}

/* A whole chunk whose primary advice is refused takes the fallback over all
 * of it -- its pages released before too (the release hunt, session 25: a
 * reuse of one of them had faulted the whole huge page back in).  Those
 * pages are fallback pages now: upgrade candidates, counted in
 * fallback_pool_pages, upgraded by later trims; filed as primary, they
 * stayed LazyFree for good (1.9 MiB of a 2 MiB chunk, never upgraded). */
static void fallback_over_a_whole_chunk_files_its_released_pages(void) {
  hl_heap *h = HEAP("thp=madvise", "warm_pages=0", "warm_demand_trims=0", "thp_prefault=0",
                    "fallback_advice=free", "verify=1");
  hl_ref r, one;
  OK(h, hl_fill(h, 4u << 20, 248, 0, &r)); /* two chunks (248 + 8: the 256-byte class) */
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 2, 1));
  OK(h, hl_trim(h));
  hl_stats a = stats_of(h);
  CHECK(a.released_pool_pages >= 32 && a.fallback_pool_pages == 0,
        "released %" PRIu64 ", on the fallback %" PRIu64, a.released_pool_pages,
        a.fallback_pool_pages);
  OK(h, hl_fill(h, 248, 248, 0, &one)); /* reuses a released page of a chunk */
  OK(h, hl_ref_release(h, one));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, ENOMEM)); /* -> MADV_FREE */
  OK(h, hl_collect(h, 2, 1));
  OK(h, hl_trim(h));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
  OK(h, hl_heap_check(h));
  hl_stats b = stats_of(h);
  CHECK(b.thp_chunks_released > a.thp_chunks_released, "no whole chunk was released");
  /* the chunk's 32 pages (64 KiB pages) went on the fallback advice (and
   * the upgrade site, not refused, may have upgraded them already) */
  CHECK(b.fallback_pages - a.fallback_pages >= 32, "%" PRIu64 " pages filed on the fallback "
        "advice after a fallback call over a whole chunk of 32",
        b.fallback_pages - a.fallback_pages);
  for (int i = 0; i < 20 && stats_of(h).fallback_pool_pages; i++) OK(h, hl_trim(h));
  OK(h, hl_heap_check(h));
  hl_stats c = stats_of(h);
  CHECK(c.fallback_pool_pages == 0 && c.upgraded_pages - a.upgraded_pages >= 32,
        "after 20 trims %" PRIu64 " pages still on the fallback, %" PRIu64 " upgraded",
        c.fallback_pool_pages, c.upgraded_pages - a.upgraded_pages);
  hl_footprint f;
  OK(h, hl_footprint_get(&f));
  CHECK(f.lazyfree < (1u << 20), "%.1f MiB LazyFree after the upgrades", f.lazyfree / MiB);
  printf("fallback over a whole chunk: %" PRIu64 " pages filed on it, %" PRIu64
         " upgraded; LazyFree %.2f MiB (thp_enabled %" PRIu64 ")\n",
         b.fallback_pages - a.fallback_pages, c.upgraded_pages - a.upgraded_pages,
         f.lazyfree / MiB, b.thp_enabled);
  hl_heap_free(h);
}

/* (the allocating thread's own calls: thp_prefault=0, no helper faults the
 * chunks in ahead -- its refusals are prefault_helper_faults_only_what_the_
 * fill_uses.c's) */
static void populate_and_its_refusals(void) {
  hl_heap *h = HEAP("thp=populate", "thp_prefault=0", "warm_pages=0");
  hl_stats s = stats_of(h);
  hl_ref r;
  uint64_t sum0, objs0, sum1, objs1;
  OK(h, hl_fill(h, 8u << 20, 256, 0, &r));
  hl_stats a = stats_of(h);
  if (s.thp_enabled) {
    CHECK(a.thp_populated_chunks >= 4, "%" PRIu64 " chunks populated by an 8 MiB fill",
          a.thp_populated_chunks);
    CHECK(a.populated_pages <= a.thp_populated_chunks, "%" PRIu64 " pages populated one by one "
          "inside populated chunks", a.populated_pages);
  } else {
    CHECK(a.thp_populated_chunks == 0 && a.thp_errno != 0,
          "thp unavailable: %" PRIu64 " chunks populated, errno %" PRIu64,
          a.thp_populated_chunks, a.thp_errno);
  }
  OK(h, hl_ref_checksum(h, r, &sum0, &objs0));

  OK(h, hl_heap_check(h));
  hl_heap_free(h);

  /* refused (memory short): recorded, the chunk faults in at first touch,
   * and the next chunk is tried again; the fill is the same */
  h = HEAP("thp=populate", "thp_prefault=0", "warm_pages=0");
  OK(h, hl_inject(h, HL_SITE_populate, HL_FAULT_first, 2, ENOMEM));
  OK(h, hl_fill(h, 8u << 20, 256, 0, &r));
  hl_stats b = stats_of(h);
  if (s.thp_enabled) {
    CHECK(b.thp_populate_refused == 1, "%" PRIu64 " refusals", b.thp_populate_refused);
    CHECK(b.thp_errno == ENOMEM, "thp_errno %" PRIu64, b.thp_errno);
    CHECK(b.thp_populated_chunks + 1 >= a.thp_populated_chunks, "populate stopped after ENOMEM: "
          "%" PRIu64 " chunks", b.thp_populated_chunks);
  }
  OK(h, hl_ref_checksum(h, r, &sum1, &objs1));
  CHECK(sum0 == sum1 && objs0 == objs1, "a fill with populate refused differs");
  OK(h, hl_heap_check(h));
  hl_heap_free(h);

  /* refused for good (a kernel without MADV_POPULATE_WRITE): asked once */
  h = HEAP("thp=populate", "thp_prefault=0", "warm_pages=0");
  OK(h, hl_inject(h, HL_SITE_populate, HL_FAULT_always, 0, EINVAL));
  OK(h, hl_fill(h, 8u << 20, 256, 0, &r));
  hl_stats c = stats_of(h);
  if (s.thp_enabled) {
    CHECK(c.thp_populate_refused == 1, "EINVAL asked %" PRIu64 " times", c.thp_populate_refused);
    CHECK(c.thp_errno == EINVAL, "thp_errno %" PRIu64, c.thp_errno);
    CHECK(c.thp_populated_chunks == 0, "populated after EINVAL");
  }
  OK(h, hl_ref_checksum(h, r, &sum1, &objs1));
  CHECK(sum0 == sum1 && objs0 == objs1, "a fill with populate refused for good differs");
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

static void never_and_small_reservations(void) {
  hl_heap *h = HEAP("thp=never", "warm_pages=0", "warm_demand_trims=0");
  hl_ref r;
  OK(h, hl_fill(h, 8u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 2, 1));
  hl_stats s = stats_of(h);
  CHECK(s.thp_disabled == 1 && s.thp_enabled == 0 && s.thp_errno == 0, "never: %" PRIu64
        "/%" PRIu64 "/%" PRIu64, s.thp_disabled, s.thp_enabled, s.thp_errno);
  CHECK(s.thp_chunks_released == 0 && s.thp_splits == 0 && s.thp_populated_chunks == 0,
        "never: chunk counters moved");
  CHECK(s.released_pages > 0, "never: nothing released");
  hl_heap_free(h);

  /* a 1 MiB reservation is one whole chunk with thp on */
  h = HEAP("thp=madvise", "reserve_bytes=1m", "page_size=4k");
  uint64_t base, bytes;
  OK(h, hl_heap_range(h, &base, &bytes));
  CHECK(base % CHUNK == 0 && bytes == CHUNK, "reserve_bytes=1m: %" PRIu64 " bytes at %#" PRIx64,
        bytes, base);
  OK(h, hl_fill(h, 512u << 10, 256, 0, &r));
  OK(h, hl_heap_check(h));
  hl_heap_free(h);

  /* a bad value is refused, naming the option and the choices */
  hl_options o;
  hl_options_defaults(&o);
  char err[256];
  int rc = hl_options_set(&o, "thp", "always", err, sizeof err);
  CHECK(rc == HL_EVALUE, "thp=always: %s", hl_error_name(rc));
  CHECK(strstr(err, "thp") && strstr(err, "never") && strstr(err, "madvise") &&
            strstr(err, "populate"),
        "message: %s", err);
}

int main(void) {
  splits_then_whole_chunks();
  subpage_release_splits_are_counted();
  fallback_over_a_whole_chunk_files_its_released_pages();
  populate_and_its_refusals();
  never_and_small_reservations();
  return 0;
}
