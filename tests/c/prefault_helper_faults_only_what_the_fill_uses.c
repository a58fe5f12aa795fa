/* thp_prefault (issue 19): while a fill carves fresh 2 MiB chunks, a helper
 * thread faults the next ones in ahead of it.  What it must never do: fault
 * in more than the fill uses, touch memory the heap released, change what
 * the fill makes, or race with a thread that allocates beside the fill.
 *   - a fill with the helper makes the same objects (checksum) and leaves
 *     as much resident (within a chunk) as one without; the helper's and
 *     the fill's chunks together are the fresh chunks carved;
 *   - after a drop and a release, the next fill reuses the released pages
 *     first and the helper only faults chunks above them;
 *   - garbage swept during the fill makes it carve less than it expected:
 *     what the helper faulted in beyond is given back (thp_prefault_unused),
 *     residency as without the helper;
 *   - a refused MADV_POPULATE_WRITE stops the helper, counted, same fill;
 *     a refusal for good (EINVAL: a kernel before 5.14; ENOSYS, EPERM)
 *     starts no helper in later fills (on cff259f thp=madvise started one
 *     per fill, refused again each time: thp_populate_refused 3 for 3 fills),
 *     also when only the helper's call was refused, the fill's own taking;
 *   - with heap_limit_bytes the fill fails once its objects fill the room
 *     under the limit: the helper faults in nothing beyond it (on 11afcff,
 *     with a 16 MiB limit and thp_prefault=64, it faulted 5-18 chunks of a
 *     200 MiB fill's window, every one beyond the limit, given back unused);
 *   - a second thread filling the same heap meanwhile (no helper of its
 *     own) waits for the helper's chunk it reaches: both fills' objects
 *     intact (their indexes may differ: see leaves_sum).
 * Runs under ThreadSanitizer (suite threads).  Where the kernel gives no
 * huge pages or there is one CPU, no helper runs and the checks of its
 * counts are skipped (the fills must still be right). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#include "check.h"

#define CHUNK ((uint64_t)2 << 20)
#define SIZE 248 /* + 8-byte header: the 256-byte class, 256 a page */

static bool helper_can_run(hl_heap *h) {
  return stats_of(h).thp_enabled && sysconf(_SC_NPROCESSORS_ONLN) > 1;
}

static void fill_sum(hl_heap *h, uint64_t bytes, uint64_t *sum, uint64_t *objs, hl_ref *out) {
  hl_ref r;
  OK(h, hl_fill(h, bytes, SIZE, 0, &r));
  OK(h, hl_ref_checksum(h, r, sum, objs));
  if (out) *out = r;
  else OK(h, hl_ref_release(h, r));
}

static void same_fill_same_residency(void) {
  uint64_t sum[2], objs[2], res[2];
  hl_stats s[2];
  for (int on = 0, attempt = 0; on < 2; on++) {
    hl_heap *h = HEAP("thp=populate", on ? "thp_prefault=4" : "thp_prefault=0", "warm_pages=0",
                      "verify=1");
    hl_ref r;
    fill_sum(h, 64u << 20, &sum[on], &objs[on], &r);
    res[on] = resident_of(h);
    s[on] = stats_of(h);
    OK(h, hl_heap_check(h));
    /* the helper is a thread: on a busy machine the fill can end before it
     * ran once (load average 3.5 on the two CPUs: "faulted in no chunk",
     * once) -- so up to five fills, the first in which it ran judged */
    if (on && helper_can_run(h) && s[on].thp_prefault_chunks == 0 && ++attempt < 5) {
      hl_heap_free(h);
      on--;
      continue;
    }
    if (on && helper_can_run(h)) {
      uint64_t chunks = (s[on].total_pages + 31) / 32;
      CHECK(s[on].thp_prefault_chunks >= 1, "the helper faulted in no chunk of a 64 MiB fill");
      CHECK(s[on].thp_prefault_chunks + s[on].thp_populated_chunks <= chunks,
            "%" PRIu64 " chunks by the helper + %" PRIu64 " by the fill, %" PRIu64 " carved",
            s[on].thp_prefault_chunks, s[on].thp_populated_chunks, chunks);
      CHECK(s[on].thp_prefault_unused == 0, "%" PRIu64 " chunks faulted in and not used",
            s[on].thp_prefault_unused);
    }
    if (!on)
      CHECK(s[on].thp_prefault_chunks == 0 && s[on].thp_prefault_waits == 0,
            "thp_prefault=0: the helper ran");
    hl_heap_free(h);
  }
  CHECK(sum[0] == sum[1] && objs[0] == objs[1], "the fill with the helper differs");
  CHECK(res[1] <= res[0] + CHUNK, "resident %.1f MiB with the helper, %.1f without",
        res[1] / MiB, res[0] / MiB);
  printf("64 MiB fill: helper %" PRIu64 " chunks, fill %" PRIu64 ", %" PRIu64
         " waits (%.1f ms); resident %.1f / %.1f MiB\n",
         s[1].thp_prefault_chunks, s[1].thp_populated_chunks, s[1].thp_prefault_waits,
         s[1].thp_prefault_wait_ns / 1e6, res[1] / MiB, res[0] / MiB);
}

static void released_pages_first(void) {
  hl_heap *h = HEAP("thp=populate", "thp_prefault=4", "warm_pages=0", "warm_demand_trims=0",
                    "release_per_sweep=1048576", "verify=1");
  uint64_t sum, objs;
  fill_sum(h, 32u << 20, &sum, &objs, NULL);
  OK(h, hl_collect(h, 2, 1));
  hl_stats a = stats_of(h);
  CHECK(a.released_pages >= 500, "%" PRIu64 " pages released", a.released_pages);
  uint64_t res0 = resident_of(h);
  hl_ref r;
  fill_sum(h, 48u << 20, &sum, &objs, &r);
  hl_stats b = stats_of(h);
  OK(h, hl_heap_check(h));
  CHECK(b.reused_pages - a.reused_pages >= a.released_pages - 32,
        "%" PRIu64 " of %" PRIu64 " released pages reused", b.reused_pages - a.reused_pages,
        a.released_pages);
  /* the helper's chunks are among the fresh ones: above the released pages */
  uint64_t fresh_chunks = (b.total_pages - a.total_pages + 31) / 32 + 1;
  CHECK(b.thp_prefault_chunks - a.thp_prefault_chunks <= fresh_chunks,
        "the helper faulted %" PRIu64 " chunks, %" PRIu64 " fresh ones carved",
        b.thp_prefault_chunks - a.thp_prefault_chunks, fresh_chunks);
  uint64_t res1 = resident_of(h);
  CHECK(res1 <= res0 + (uint64_t)(48u << 20) * 272 / 256 + 4 * CHUNK,
        "resident %.1f MiB after a 48 MiB fill", res1 / MiB);
  printf("after a release: helper %" PRIu64 " chunks of %" PRIu64 " fresh, %" PRIu64
         " pages reused\n", b.thp_prefault_chunks - a.thp_prefault_chunks, fresh_chunks,
         b.reused_pages - a.reused_pages);
  OK(h, hl_ref_release(h, r));
  hl_heap_free(h);
}

/* 40 MiB of garbage the fill's first cycle sweeps: the fill takes those
 * pages and carves fewer fresh ones than it expected. */
/* Resident bytes past the last carved page's chunk. */
static uint64_t beyond_carved(hl_heap *h) {
  uint64_t base, bytes;
  OK(h, hl_heap_range(h, &base, &bytes));
  uint64_t carved = stats_of(h).total_pages * 65536;
  return mincore_resident(base + (carved + CHUNK - 1) / CHUNK * CHUNK, base + bytes);
}

static void garbage_swept_meanwhile(void) {
  uint64_t res[2], sum[2], objs[2];
  hl_stats s[2];
  for (int on = 0; on < 2; on++) {
    hl_heap *h = HEAP("thp=populate", on ? "thp_prefault=8" : "thp_prefault=0", "warm_pages=0",
                      "gc_trigger_bytes=16m", "adaptive_trigger=0", "gc_live_ratio=0");
    hl_ref g;
    OK(h, hl_fill(h, 40u << 20, SIZE, 0, &g));
    OK(h, hl_ref_release(h, g)); /* garbage, not yet swept */
    hl_stats a = stats_of(h);
    fill_sum(h, 64u << 20, &sum[on], &objs[on], NULL);
    s[on] = stats_of(h);
    CHECK(s[on].cycles > a.cycles, "no cycle during the fill");
    OK(h, hl_heap_check(h));
    res[on] = resident_of(h);
    /* (resident_of does not look past the carved pages: the helper's
     * unused chunks, counted as given back, stayed resident unseen -- the
     * mutation hunt, twenty-fifth session) */
    uint64_t beyond = beyond_carved(h);
    CHECK(beyond == 0, "%.1f MiB resident beyond the carved pages after the fill (%" PRIu64
          " chunks counted as given back)", beyond / MiB, s[on].thp_prefault_unused);
    if (on) {
      uint64_t carved = s[on].total_pages - a.total_pages;
      uint64_t used = (s[on].thp_prefault_chunks - a.thp_prefault_chunks) -
                      (s[on].thp_prefault_unused - a.thp_prefault_unused);
      CHECK(used <= carved / 32 + 1, "the helper's %" PRIu64 " chunks in use, %" PRIu64
            " pages carved", used, carved);
    }
    hl_heap_free(h);
  }
  CHECK(sum[0] == sum[1] && objs[0] == objs[1], "the fill with the helper differs");
  CHECK(res[1] <= res[0] + CHUNK, "resident %.1f MiB with the helper, %.1f without: what it "
        "faulted in beyond the fill stayed", res[1] / MiB, res[0] / MiB);
  printf("garbage swept meanwhile: helper %" PRIu64 " chunks, %" PRIu64 " given back; resident "
         "%.1f / %.1f MiB\n", s[1].thp_prefault_chunks, s[1].thp_prefault_unused, res[1] / MiB,
         res[0] / MiB);
}

/* The helper's unused chunks given back with a call the kernel refused: a
 * later trim tries again (they stayed resident for the heap's life, where
 * resident_bytes does not look: 4-6 MiB after an interrupted fill, the
 * release hunt, session 25).  garbage_swept_meanwhile's fill, with the
 * release advice refused (the fallback too) while it runs. */
/* Returns whether the helper left chunks beyond the fill (not every run:
 * the fill may use every chunk it faulted in). */
static bool giveback_refused_is_tried_again_once(void) {
  hl_heap *h = HEAP("thp=populate", "thp_prefault=8", "warm_pages=0", "warm_demand_trims=0",
                    "gc_trigger_bytes=16m", "adaptive_trigger=0", "gc_live_ratio=0");
  if (!helper_can_run(h)) {
    puts("give-back refused: no helper runs here (no huge pages or one CPU)");
    hl_heap_free(h);
    return true;
  }
  hl_ref g;
  OK(h, hl_fill(h, 40u << 20, SIZE, 0, &g));
  OK(h, hl_ref_release(h, g));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, ENOMEM));
  OK(h, hl_inject(h, HL_SITE_fallback, HL_FAULT_always, 0, ENOMEM));
  uint64_t sum, objs;
  hl_ref kept;
  fill_sum(h, 64u << 20, &sum, &objs, &kept);
  hl_stats a = stats_of(h);
  uint64_t left = beyond_carved(h);
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_off, 0, 0));
  OK(h, hl_inject(h, HL_SITE_fallback, HL_FAULT_off, 0, 0));
  /* a fill carves pages in the chunks left behind before a trim retries
   * them (nothing to reuse: the fill above is kept): the retry gives back
   * only what is above the carved pages, and this fill's objects read back
   * as written (the retry gave back from where the refusal left, carved
   * pages too: the mutation audit, session 37).  Half of what was left:
   * a fill of all of it and more (left + 4 MiB, session 37) carved every
   * chunk left behind, and a trim that never retried passed the check
   * below too (prefault-giveback-never-retried lived: the whole audit,
   * session 40) */
  uint64_t sum2, objs2, again, again_objs;
  hl_ref kept2;
  fill_sum(h, left / 2, &sum2, &objs2, &kept2);
  OK(h, hl_collect(h, 2, 1));
  OK(h, hl_trim(h));
  OK(h, hl_heap_check(h));
  OK(h, hl_ref_checksum(h, kept2, &again, &again_objs));
  CHECK(again == sum2 && again_objs == objs2, "the fill carved into the chunks left behind "
        "changed after the retry (%" PRIu64 " objects, checksum %s)", again_objs,
        again == sum2 ? "the same" : "changed");
  OK(h, hl_ref_checksum(h, kept, &again, &again_objs));
  CHECK(again == sum && again_objs == objs, "the kept fill changed after the retry");
  OK(h, hl_ref_release(h, kept));
  OK(h, hl_ref_release(h, kept2));
  hl_stats b = stats_of(h);
  uint64_t beyond = beyond_carved(h);
  CHECK(beyond == 0, "%.1f MiB resident beyond the carved pages after the refusal ended "
        "(%.1f MiB before; %" PRIu64 " -> %" PRIu64 " chunks given back)", beyond / MiB,
        left / MiB, a.thp_prefault_unused, b.thp_prefault_unused);
  printf("give-back refused, then tried again: %.1f MiB left beyond the carved pages, %" PRIu64
         " -> %" PRIu64 " chunks given back; %.1f MiB resident there after\n", left / MiB,
         a.thp_prefault_unused, b.thp_prefault_unused, beyond / MiB);
  hl_heap_free(h);
  return left > 0;
}

/* Tried until a fill leaves chunks behind (about one try in two does), and a
 * failure when none of 24 did: eight tries with no check passed without
 * testing anything in ~0.7% of runs (the review, session 25). */
static void giveback_refused_is_tried_again(void) {
  int tries = 0;
  bool hit = false;
  while (!hit && tries < 24) hit = giveback_refused_is_tried_again_once(), tries++;
  CHECK(hit, "give-back refused: no fill of %d left the helper's chunks behind; the "
        "retry was not exercised", tries);
}

static void refused(void) {
  hl_heap *h = HEAP("thp=populate", "thp_prefault=4", "warm_pages=0");
  bool can = helper_can_run(h);
  OK(h, hl_inject(h, HL_SITE_populate, HL_FAULT_always, 0, ENOMEM));
  uint64_t sum, objs, sum0, objs0;
  fill_sum(h, 32u << 20, &sum, &objs, NULL);
  hl_stats s = stats_of(h);
  CHECK(s.thp_prefault_chunks == 0 && s.thp_populated_chunks == 0, "populated while refused");
  if (can) CHECK(s.thp_populate_refused >= 2 && s.thp_errno == ENOMEM, "%" PRIu64 " refusals, "
                 "errno %" PRIu64, s.thp_populate_refused, s.thp_errno);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  h = HEAP("thp=never");
  fill_sum(h, 32u << 20, &sum0, &objs0, NULL);
  hl_heap_free(h);
  CHECK(sum == sum0 && objs == objs0, "the refused fill differs");
}

typedef struct {
  hl_heap *h;
  uint64_t sum, objs;
} side_fill;

/* The checksum of a fill's objects alone, through hl_thin.  The fill's index
 * (its nodes' sizes and count) depends on which slots of each page were free
 * when a group started, so another thread allocating in a class the fill
 * uses (the side's index nodes of 31 slots are 256 bytes, the main fill's
 * class) changes the index, never the objects. */
static void leaves_sum(hl_heap *h, hl_ref r, uint64_t *sum, uint64_t *objs) {
  hl_ref k;
  OK(h, hl_thin(h, r, 1, &k));
  OK(h, hl_ref_checksum(h, k, sum, objs));
  OK(h, hl_ref_release(h, k));
}

static void refused_for_good(void) {
  hl_heap *h = HEAP("thp=madvise", "thp_prefault=4", "warm_pages=0", "warm_demand_trims=0");
  bool can = helper_can_run(h);
  OK(h, hl_inject(h, HL_SITE_populate, HL_FAULT_always, 0, EINVAL));
  uint64_t sum, objs;
  for (int i = 0; i < 3; i++) fill_sum(h, 16u << 20, &sum, &objs, NULL);
  hl_stats s = stats_of(h);
  CHECK(s.thp_prefault_chunks == 0, "populated while refused");
  /* The first fill's helper asks once, or not at all: the fill's own page
   * populate, refused too, stops later helpers since d501683, and under
   * load the fill may end before its helper thread ran (4 of 20 runs at
   * load 10 saw 0 refusals with == 1 here).  The helper's own refusal is
   * helper_refused_for_good_alone's. */
  if (can)
    CHECK(s.thp_populate_refused <= 1 && (s.thp_populate_refused == 0 || s.thp_errno == EINVAL),
          "%" PRIu64 " refusals (errno %" PRIu64 ") in 3 fills: EINVAL is for good, only the first "
          "fill's helper may have asked", s.thp_populate_refused, s.thp_errno);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

/* The helper's own refusal for good, the fill's calls taking: EINVAL sticky
 * on the last page of chunk 6, which only the helper's 2 MiB call covers
 * (the fill's call over a chunk's first page does not).  The fill after it
 * starts no helper and populates no page.  (refused_for_good cannot show
 * this: there the fill's own page populate is refused too, which stops
 * later helpers since d501683 -- tools/mutants.toml's mutant
 * prefault-refusal-for-good-asked-again survived it.)  A helper that does
 * not reach chunk 6 before the fill does (it is late to run) asks nothing
 * that is refused: the heap is made again, up to 50 times (1 to 10 were
 * needed at load 8). */
static void helper_refused_for_good_alone(void) {
  for (int attempt = 0; attempt < 50; attempt++) {
    hl_heap *h = HEAP("thp=madvise", "thp_prefault=4", "warm_pages=0", "warm_demand_trims=0");
    if (!helper_can_run(h)) {
      hl_heap_free(h);
      return;
    }
    uint32_t per = (uint32_t)(CHUNK / 65536);
    OK(h, hl_inject(h, HL_SITE_populate, HL_FAULT_sticky, (int64_t)(6 * per + per - 1), EINVAL));
    hl_ref a, b;
    uint64_t sum, objs;
    fill_sum(h, 32u << 20, &sum, &objs, &a); /* kept: the next fill's pages are fresh */
    hl_stats s1 = stats_of(h);
    if (s1.thp_populate_refused == 0) {
      OK(h, hl_ref_release(h, a));
      hl_heap_free(h);
      continue;
    }
    CHECK(s1.thp_populate_refused == 1 && s1.thp_errno == EINVAL, "%" PRIu64 " refusals, errno "
          "%" PRIu64, s1.thp_populate_refused, s1.thp_errno);
    fill_sum(h, 32u << 20, &sum, &objs, &b);
    hl_stats s2 = stats_of(h);
    printf("helper refused for good (attempt %d): the next fill's helper %" PRIu64
           " chunks, %" PRIu64 " pages populated\n", attempt + 1,
           s2.thp_prefault_chunks - s1.thp_prefault_chunks,
           s2.populated_pages - s1.populated_pages);
    CHECK(s2.thp_prefault_chunks == s1.thp_prefault_chunks &&
          s2.populated_pages == s1.populated_pages,
          "after the helper's EINVAL the next fill's helper faulted %" PRIu64 " chunks and the "
          "fill populated %" PRIu64 " pages: EINVAL is for good",
          s2.thp_prefault_chunks - s1.thp_prefault_chunks,
          s2.populated_pages - s1.populated_pages);
    OK(h, hl_ref_release(h, a));
    OK(h, hl_ref_release(h, b));
    OK(h, hl_heap_check(h));
    hl_heap_free(h);
    return;
  }
  printf("helper refused for good: the helper never reached chunk 6 first in 50 heaps "
         "(skipped)\n");
}

static void heap_limit_bounds_the_helper(void) {
  hl_heap *h = HEAP("thp=populate", "thp_prefault=64", "heap_limit_bytes=16m", "warm_pages=0");
  hl_ref r;
  CHECK(hl_fill(h, 200u << 20, SIZE, 0, &r) == HL_ENOMEM, "a 200 MiB fill under a 16 MiB limit");
  hl_stats s = stats_of(h);
  printf("16 MiB limit: helper %" PRIu64 " chunks, %" PRIu64 " unused; %" PRIu64 " pages carved\n",
         s.thp_prefault_chunks, s.thp_prefault_unused, s.total_pages);
  CHECK(s.thp_prefault_unused == 0, "the helper faulted in %" PRIu64 " chunks beyond what the "
        "limit let the fill use (%" PRIu64 " pages carved)", s.thp_prefault_unused, s.total_pages);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

static void *side(void *arg) {
  side_fill *f = arg;
  for (int i = 0; i < 4; i++) {
    uint64_t sum, objs;
    hl_ref r;
    OK(f->h, hl_fill(f->h, 4u << 20, 120, 0, &r));
    leaves_sum(f->h, r, &sum, &objs);
    OK(f->h, hl_ref_release(f->h, r));
    CHECK(i == 0 || (sum == f->sum && objs == f->objs), "side fill %d differs: %" PRIx64 " %" PRIu64 " vs %" PRIx64 " %" PRIu64, i, sum, objs, f->sum, f->objs);
    f->sum = sum;
    f->objs = objs;
  }
  return NULL;
}

static void beside_another_thread(void) {
  hl_heap *h = HEAP("thp=populate", "thp_prefault=2", "warm_pages=0", "verify=1");
  side_fill f = {h, 0, 0};
  pthread_t t;
  CHECK(pthread_create(&t, NULL, side, &f) == 0, "pthread_create");
  uint64_t sum, objs;
  hl_ref r;
  OK(h, hl_fill(h, 48u << 20, SIZE, 0, &r));
  CHECK(pthread_join(t, NULL) == 0, "pthread_join");
  leaves_sum(h, r, &sum, &objs);
  OK(h, hl_ref_release(h, r));
  OK(h, hl_heap_check(h));
  hl_stats s = stats_of(h);
  hl_heap_free(h);
  h = HEAP("thp=never");
  uint64_t sum0, objs0;
  OK(h, hl_fill(h, 48u << 20, SIZE, 0, &r));
  leaves_sum(h, r, &sum0, &objs0);
  OK(h, hl_ref_release(h, r));
  hl_heap_free(h);
  CHECK(sum == sum0 && objs == objs0, "the objects of the fill beside another thread differ");
  printf("beside another thread: helper %" PRIu64 " chunks, %" PRIu64 " waits\n",
         s.thp_prefault_chunks, s.thp_prefault_waits);
}

int main(void) {
  same_fill_same_residency();
  released_pages_first();
  garbage_swept_meanwhile();
  giveback_refused_is_tried_again();
  refused();
  refused_for_good();
  helper_refused_for_good_alone();
  heap_limit_bounds_the_helper();
  beside_another_thread();
  return 0;
}
