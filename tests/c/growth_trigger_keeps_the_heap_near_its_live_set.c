/* gc_growth_ratio (the default trigger since issue 19): the heap grows only
 * by need.  binary-trees in miniature -- a stretch tree, a long-lived tree,
 * then many short-lived trees of growing depth -- on the seed's trigger
 * (gc_growth_ratio=0: the trigger adds 200% of the bytes last marked, and
 * the partial pages keep their garbage until a quiet or backstop sweep)
 * carves far more pages than the live set needs; with the default (100) the
 * pages carved stay within twice the largest live set plus the trigger,
 * the partial pages are swept when the heap would otherwise grow
 * (major_growth), and the trees are intact (the checksums agree). */
#include "check.h"

static hl_heap *H;
static void *shadow[2];

static int build(void *node, int d, uint64_t item) {
  *(uint64_t *)hl_obj_data(node) = item;
  if (d == 0) return 0;
  void *l = hl_obj_new_in(H, node, 0, sizeof(uint64_t), 2);
  if (!l || build(l, d - 1, 2 * item)) return 1;
  void *r = hl_obj_new_in(H, node, 1, sizeof(uint64_t), 2);
  if (!r || build(r, d - 1, 2 * item + 1)) return 1;
  return 0;
}

static void make_tree(int slot, int d, uint64_t item) {
  shadow[slot] = hl_obj_new(H, sizeof(uint64_t), 2);
  CHECK(shadow[slot] && !build(shadow[slot], d, item), "allocation failed: %s",
        hl_heap_error(H));
}

static uint64_t check(void *n) {
  if (!n) return 0;
  void *const *s = hl_obj_slots(n);
  return *(const uint64_t *)hl_obj_data(n) * 31 + check(s[0]) * 7 + check(s[1]);
}

typedef struct run {
  uint64_t carved, cycles, major_growth, sum;
} run;

enum { MAX = 15 };

static run trees(const char *growth) {
  H = HEAP(growth, "gc_trigger_bytes=1m", "gc_trigger_min_bytes=256k", "page_release=false",
           "verify=false");
  OK(H, hl_roots_add(H, shadow, 2, 0));
  hl_enter(H);
  run r = {0};
  make_tree(1, MAX + 1, 1); /* the stretch tree */
  r.sum += check(shadow[1]);
  shadow[1] = NULL;
  make_tree(0, MAX, 2); /* long-lived */
  for (int d = 4; d <= MAX; d += 2) {
    for (uint64_t i = 1; i <= (1ull << (MAX + 4 - d)) / 4; i++) {
      make_tree(1, d, i);
      r.sum += check(shadow[1]);
      shadow[1] = NULL;
    }
  }
  r.sum += check(shadow[0]);
  shadow[0] = NULL;
  hl_leave(H);
  hl_stats s = stats_of(H);
  hl_options o;
  OK(H, hl_heap_options(H, &o));
  r.carved = s.total_pages * (uint64_t)o.page_size;
  r.cycles = s.cycles;
  r.major_growth = s.major_growth;
  check_invariants(H);
  hl_heap_free(H);
  return r;
}

int main(void) {
  run seed = trees("gc_growth_ratio=0");
  run dflt = trees("gc_growth_ratio=100");
  /* the largest live set: the stretch tree (2^(MAX+2) - 1 nodes of 32 bytes) */
  double live = (double)((1ull << (MAX + 2)) * 32);
  printf("seed trigger: %.1f MiB carved, %" PRIu64 " cycles; gc_growth_ratio=100: %.1f MiB, %" PRIu64
         " cycles, %" PRIu64 " growth sweeps; largest live set %.1f MiB\n",
         seed.carved / MiB, seed.cycles, dflt.carved / MiB, dflt.cycles, dflt.major_growth,
         live / MiB);
  CHECK(seed.sum == dflt.sum, "checksums differ: %" PRIx64 " vs %" PRIx64, seed.sum, dflt.sum);
  CHECK(dflt.major_growth > 0, "no partial-page sweep was called by the heap's growth");
  /* twice the live set, the 1 MiB trigger, and a page per size class of
   * slack on either side */
  CHECK(dflt.carved <= live * 2 + 2 * MiB, "%.1f MiB carved for %.1f MiB live",
        dflt.carved / MiB, live / MiB);
  CHECK(dflt.carved * 10 <= seed.carved * 7, "%.1f MiB carved against the seed trigger's %.1f",
        dflt.carved / MiB, seed.carved / MiB);
  hl_options o;
  hl_options_defaults(&o);
  CHECK(o.gc_growth_ratio == 100, "gc_growth_ratio defaults to %" PRId64, o.gc_growth_ratio);
  return 0;
}
