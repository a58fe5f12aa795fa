/* hl_ref_identity names one live object: two live objects never share an
 * identity, whatever compaction did.  (An object asked its identity at
 * address X, then moved by compaction, kept X; a new object allocated at X
 * -- the slot the move emptied -- was then given X too: two live objects,
 * one identity.  Python's hash tolerates that; a Lua table keyed by o:id()
 * in a graph walk took one object for the other.) */
#include "check.h"

#define N 4000
#define JUNK 9

int main(void) {
  hl_heap *h = HEAP("compact=always", "warm_pages=0", "page_size=16k");
  static hl_ref keep[N];
  static uint64_t id[N];
  /* N objects spread thin over many pages (9 dead for 1 live), each asked
   * its identity where it was made */
  for (int i = 0; i < N; i++) {
    OK(h, hl_alloc(h, 48, 0, &keep[i]));
    OK(h, hl_ref_identity(h, keep[i], &id[i]));
    for (int g = 0; g < JUNK; g++) {
      hl_ref junk;
      OK(h, hl_alloc(h, 48, 0, &junk));
      OK(h, hl_ref_release(h, junk));
    }
  }
  OK(h, hl_collect(h, 1, 1));
  hl_stats s = stats_of(h);
  CHECK(s.evacuated_objects > N / 2, "compaction moved %" PRIu64 " objects", s.evacuated_objects);
  /* they keep their identities where they moved */
  for (int i = 0; i < N; i++) {
    uint64_t again;
    OK(h, hl_ref_identity(h, keep[i], &again));
    CHECK(again == id[i], "object %d's identity changed", i);
  }
  /* new objects land in the slots the moves emptied: none may take an
   * identity a live object has (sorted: a binary search per new one) */
  uint64_t sorted[N];
  memcpy(sorted, id, sizeof sorted);
  for (int i = 1; i < N; i++)
    for (int j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
      uint64_t t = sorted[j];
      sorted[j] = sorted[j - 1];
      sorted[j - 1] = t;
    }
  int shared = 0;
  for (int i = 0; i < N * (JUNK + 1); i++) {
    hl_ref o;
    uint64_t u;
    OK(h, hl_alloc(h, 48, 0, &o));
    OK(h, hl_ref_identity(h, o, &u));
    int lo = 0, hi = N;
    while (lo < hi) {
      int mid = (lo + hi) / 2;
      if (sorted[mid] < u) lo = mid + 1;
      else hi = mid;
    }
    if (lo < N && sorted[lo] == u) shared++;
    /* kept: a released one's slot would be handed out again */
  }
  CHECK(shared == 0, "%d new objects took the identity of a live one", shared);
  check_invariants(h);
  hl_heap_free(h);
  printf("ok: %" PRIu64 " moved, no identity shared\n", s.evacuated_objects);
  return 0;
}
