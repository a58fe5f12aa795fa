/* Any value is allowed in any root region (docs/design.md, "Conservative
 * root regions"): a word that names no object keeps nothing, a word that
 * names a dead object not yet swept brings it back -- precise or
 * conservative alike.  A dead object brought back may hold in a slot the
 * address of one freed since; verify's check between mark and sweep took
 * such a slot for a program's bad store ("marked object ... slot 0 holds
 * ..., not an object") unless a region was conservative: a heap whose
 * regions were all precise counted a verify failure after every cycle, in
 * a program that did nothing wrong.  A stale precise word: a region removed
 * (hl_roots_remove; compaction no longer updates it, what it kept may die)
 * and added again with the words it had, or a word the program keeps after
 * it dropped what it named.  (Found extending fuzz_heap's root regions with
 * hl_roots_remove, session 40.)
 *
 * How: X holds the only reference to W, both die; X's page is not swept
 * (sweep=retired sweeps a partial page only in a major sweep) while W's is,
 * which frees W's slot.  A precise word naming X then brings X back, its
 * slot naming W's free slot. */
#include "check.h"

#define NR 340 /* 48-byte objects: four pages of 4 KiB */

static void *roots[NR], *keep[2], *word[1];

int main(void) {
  /* no major sweep (quiet, backstop, growth): X's page must stay unswept */
  hl_heap *h = HEAP("page_size=4k", "gc_trigger_bytes=64k", "gc_trigger_min_bytes=64k",
                    "major_backstop_cycles=0", "gc_growth_ratio=0", "quiet_bytes=0",
                    "verify=true");
  /* every region precise */
  OK(h, hl_roots_add(h, roots, NR, 0));
  OK(h, hl_roots_add(h, keep, 2, 0));
  OK(h, hl_roots_add(h, word, 1, 0));
  for (int i = 0; i < NR; i++) roots[i] = obj_made(h, 16, 3);
  cycle_by_garbage(h); /* the pages swept once: partial, dense */

  /* W between two live objects of its class, on the page being filled */
  void *x = roots[2 * 85 + 5];
  keep[0] = obj_made(h, 40, 1);
  void *w = obj_made(h, 40, 1);
  keep[1] = obj_made(h, 40, 1);
  hl_obj_set(x, 0, w);
  roots[2 * 85 + 5] = NULL;
  cycle_by_garbage(h); /* X dead, its page not swept; W's page swept: W freed */
  hl_stats s;
  OK(h, hl_stats_get(h, &s));
  CHECK(s.verify_failures == 0, "verify failures before the stale word: %" PRIu64 ": %s",
        s.verify_failures, hl_heap_error(h));

  /* the region out and back with a stale word: X brought back */
  OK(h, hl_roots_remove(h, word));
  __atomic_store_n(&word[0], x, __ATOMIC_RELAXED);
  OK(h, hl_roots_add(h, word, 1, 0));
  cycle_by_garbage(h);
  cycle_by_garbage(h);
  OK(h, hl_stats_get(h, &s));
  CHECK(s.verify_failures == 0, "verify failures %" PRIu64 ": %s", s.verify_failures,
        hl_heap_error(h));
  OK(h, hl_heap_check(h));
  /* X is kept by the word: its slot still names W's address, whatever is there now */
  CHECK(hl_obj_slots(x)[0] == w, "X's slot changed: %p", hl_obj_slots(x)[0]);
  hl_heap_free(h);
  return 0;
}
