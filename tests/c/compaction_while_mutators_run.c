/* The background collector compacting (compact=always, subpage_release on)
 * while mutator threads run: a cycle, compaction included, runs under the
 * heap lock -- stop-the-world -- and every mutator call takes that lock, so
 * no mutator sees an object half moved.  Checked here:
 *   - handle mutators: sparse survivors (one object kept between garbage),
 *     rewritten and read back through handles while the collector moves
 *     them: no payload changes, no slot is lost;
 *   - a raw-pointer mutator holding the heap (hl_enter) for stretches of
 *     allocations and cycles of its own: its raw pointers keep pointing at
 *     its objects (nothing moves while a thread holds the heap), and after
 *     hl_leave it finds them again through its precise root region, which
 *     the collector updates when it moves them;
 *   - the collector really moved objects meanwhile (evacuated_objects), and
 *     verify found no reference left behind in an evacuated page.
 * Built and run under ThreadSanitizer too (suite 'threads'). */
#include <pthread.h>
#include <time.h>

#include "check.h"

#define THREADS 3
#define SLOTS 256
#define RAW 16

static hl_heap *h;
static double seconds = 2.0;
static void *raw_roots[RAW]; /* the raw mutator's precise root region */

/* The mutators run `seconds`, and on until the background collector has
 * woken three times (at most ten times as long): under ThreadSanitizer on a
 * loaded machine the raw mutator's own cycles could do all the work of two
 * seconds (106 cycles, 1 wake-up, in one make test from a clean clone). */
static int keep_going(double end) {
  double t = now_s();
  if (t < end) return 1;
  if (t > end + 9 * seconds) return 0;
  hl_stats s;
  return hl_stats_get(h, &s) == HL_OK && s.collector_wakeups < 3;
}

static void pattern(unsigned char *buf, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; i++) buf[i] = (unsigned char)(seed * 31 + i * 7);
}

static void check_slot(hl_ref root, uint64_t s, uint64_t seed, uint64_t t) {
  unsigned char buf[512], got[512];
  hl_ref o;
  OK(h, hl_ref_get(h, root, s, &o));
  CHECK(o, "thread %" PRIu64 ": slot %" PRIu64 " lost its object", t, s);
  hl_object_info info;
  OK(h, hl_ref_info(h, o, &info));
  OK(h, hl_ref_read(h, o, 0, got, info.size));
  pattern(buf, info.size, seed);
  CHECK(memcmp(buf, got, info.size) == 0, "thread %" PRIu64 ": slot %" PRIu64 " corrupted", t, s);
  OK(h, hl_ref_release(h, o));
}

static void *handle_mutator(void *arg) {
  uint64_t t = (uint64_t)(uintptr_t)arg;
  hl_ref root;
  OK(h, hl_alloc(h, 0, SLOTS, &root));
  uint64_t last[SLOTS] = {0};
  unsigned char buf[512];
  double end = now_s() + seconds;
  uint64_t i = 0;
  while (keep_going(end)) {
    for (int k = 0; k < 64; k++, i++) {
      uint64_t size = 8 + (i * 13 + t) % 200;
      uint64_t seed = t << 40 | i;
      hl_ref o;
      OK(h, hl_alloc(h, size, 1, &o));
      pattern(buf, size, seed);
      OK(h, hl_ref_write(h, o, 0, buf, size));
      OK(h, hl_ref_set(h, root, i % SLOTS, o));
      OK(h, hl_ref_release(h, o));
      last[i % SLOTS] = seed;
      for (int g = 0; g < 20; g++) { /* garbage around each survivor: sparse pages */
        hl_ref junk;
        OK(h, hl_alloc(h, size, 0, &junk));
        OK(h, hl_ref_release(h, junk));
      }
    }
    uint64_t s = (i * 7) % SLOTS;
    if (last[s]) check_slot(root, s, last[s], t);
  }
  for (uint64_t s = 0; s < SLOTS; s++)
    if (last[s]) check_slot(root, s, last[s], t);
  OK(h, hl_ref_release(h, root));
  return NULL;
}

static void *raw_mutator(void *arg) {
  (void)arg;
  double end = now_s() + seconds;
  uint64_t round = 0;
  while (keep_going(end)) {
    hl_enter(h);
    void *mine[RAW];
    for (int k = 0; k < RAW; k++) {
      raw_roots[k] = hl_obj_new(h, 64, 0);
      CHECK(raw_roots[k], "raw alloc: %s", hl_heap_error(h));
      memset(hl_obj_data(raw_roots[k]), (int)(round + k) & 0xff, 64);
      mine[k] = raw_roots[k];
      for (int g = 0; g < 20; g++) CHECK(hl_obj_new(h, 64, 0), "raw garbage");
    }
    /* a cycle of its own every 4th round, held: nothing moves (every round,
     * its collections kept the handle mutators below the trigger: under
     * TSan, 1025 cycles and no collector wake-up in 20 s) */
    if (round % 4 == 0) OK(h, hl_collect(h, 1, 1));
    for (int k = 0; k < RAW; k++) {
      CHECK(raw_roots[k] == mine[k], "raw object %d moved while the heap was held", k);
      const unsigned char *d = hl_obj_data(mine[k]);
      for (int b = 0; b < 64; b++)
        CHECK(d[b] == ((round + (uint64_t)k) & 0xff), "raw object %d corrupted while held", k);
    }
    hl_leave(h);
    /* not held: the collector may move them now; the region follows */
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
    hl_enter(h);
    for (int k = 0; k < RAW; k++) {
      const unsigned char *d = hl_obj_data(raw_roots[k]);
      for (int b = 0; b < 64; b++)
        CHECK(d[b] == ((round + (uint64_t)k) & 0xff), "raw object %d lost after hl_leave", k);
    }
    hl_leave(h);
    round++;
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) seconds = atof(argv[1]);
  h = HEAP("collector=background", "compact=always", "subpage_release=true",
           "gc_trigger_bytes=256k", "gc_trigger_min_bytes=256k", "warm_pages=4", "verify=true",
           "page_size=16k");
  OK(h, hl_roots_add(h, raw_roots, RAW, 0));
  pthread_t th[THREADS + 1];
  for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, handle_mutator, (void *)t);
  pthread_create(&th[THREADS], NULL, raw_mutator, NULL);
  for (int t = 0; t <= THREADS; t++) pthread_join(th[t], NULL);
  hl_stats s = stats_of(h);
  printf("%.1f s: %" PRIu64 " cycles (%" PRIu64 " collector wake-ups), %" PRIu64
         " compactions, %" PRIu64 " objects moved, %" PRIu64 " pinned, %" PRIu64
         " sub-page runs\n", seconds, s.cycles, s.collector_wakeups, s.compactions,
         s.evacuated_objects, s.pinned_objects, s.subpage_runs);
  CHECK(s.collector_wakeups >= 3, "the background collector ran %" PRIu64 " cycles",
        s.collector_wakeups);
  CHECK(s.evacuated_objects > 0, "nothing was moved");
  CHECK(s.pinned_objects > 0, "the held cycles pinned nothing");
  CHECK(s.verify_failures == 0, "verify failed: %s", hl_heap_error(h));
  OK(h, hl_roots_remove(h, raw_roots));
  OK(h, hl_collect(h, 2, 1));
  check_invariants(h);
  hl_heap_free(h);
  return 0;
}
