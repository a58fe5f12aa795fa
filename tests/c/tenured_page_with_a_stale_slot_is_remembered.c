/* A tenured page is traced by a full mark that skips tenured pages only
 * while it is remembered: when it is tenured, a page whose objects may refer
 * to an object not tenured is remembered (gc/mark.c, refers_untenured).  A
 * slot word that names no object then -- the slot of an object freed since
 * -- was taken to refer to nothing; but it names one as soon as an object is
 * allocated at that address, and the page was not traced to mark it: the
 * verifier (verify=true) saw "marked object refers to unmarked object" after
 * every full mark, in a program that did nothing wrong.
 *
 * How a live-marked object gets such a slot: X held the only reference to W
 * and both died; X's page was not swept (sweep=retired sweeps partial pages
 * only in a major sweep) while W's was, which freed W's slot.  Then a word of
 * a conservative root region -- a stale stack word, say -- pointed at X
 * again: X is marked, its slot still naming W's free slot; its page dense
 * twice, it is tenured.  A new object in W's slot is garbage (nothing but X,
 * itself garbage, names it), yet X is marked and refers to it.  With
 * tenure_full_marks=0 the same program is clean: every full mark traces X. */
#include "check.h"

#define NR 340 /* 48-byte objects: four pages of 4 KiB */

static void *roots[NR], *keep[2], *cons[1];

int main(void) {
  /* no major sweep (quiet, backstop, growth) and no whole mark: the sequence
   * below needs X's page unswept and tenured pages kept */
  hl_heap *h = HEAP("page_size=4k", "gc_trigger_bytes=64k", "gc_trigger_min_bytes=64k",
                    "tenure_full_marks=1000", "major_backstop_cycles=0", "gc_growth_ratio=0",
                    "quiet_bytes=0", "verify=true");
  OK(h, hl_roots_add(h, roots, NR, 0));
  OK(h, hl_roots_add(h, keep, 2, 0));
  OK(h, hl_roots_add(h, cons, 1, 1));
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

  cons[0] = x;  /* a stale word brings X back */
  cycle_by_garbage(h);
  cycle_by_garbage(h); /* X's page dense twice: tenured */
  hl_stats s;
  OK(h, hl_stats_get(h, &s));
  CHECK(s.tenured_pages >= 4, "%" PRIu64 " pages tenured", s.tenured_pages);

  void *w2 = NULL; /* garbage in W's slot */
  for (int k = 0; k < 100 && w2 != w; k++) w2 = obj_made(h, 40, 1);
  CHECK(w2 == w, "W's slot was not reused");
  cycle_by_garbage(h);
  cycle_by_garbage(h);
  OK(h, hl_stats_get(h, &s));
  CHECK(s.whole_marks == 0, "a whole mark ran");
  CHECK(s.verify_failures == 0, "verify failures %" PRIu64 ": %s", s.verify_failures,
        hl_heap_error(h));
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  return 0;
}
