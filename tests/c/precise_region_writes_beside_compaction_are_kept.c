/* A client writes the words of a precise root region while cycles with
 * compaction run on another thread (the background collector; here the
 * main thread's hl_collect): every word the client reads back is the one it
 * wrote last.  The update after an evacuation read every word of every
 * precise region and wrote it back (forwarded or not), so a word the client
 * stored between that read and that write was overwritten with its older
 * value: the heap wrote into the client's memory what the client had
 * replaced (with a 64 Ki-word region, thousands of such words in a few
 * hundred cycles).  The update now writes only a word that holds an
 * evacuated object, with a compare-and-swap against the value it read, and
 * reads the words with atomic loads as the marker does.  The region also
 * holds one object's start, kept by that word alone: it must follow the
 * object when it moves and keep its payload.  Suite threads: under
 * ThreadSanitizer the plain reads and writes of the region were races. */
#include <pthread.h>
#include <stdatomic.h>

#include "check.h"

enum { WORDS = 1 << 16, ROUNDS = 400, KEPT_WORD = 0 };

static void *words[WORDS];
static atomic_int stop;
static atomic_ulong mismatches;

/* Stores an odd number (never an object's start) into words 1.., then
 * reads them all back, round after round. */
static void *writer(void *arg) {
  (void)arg;
  for (uint64_t seq = 1; !atomic_load(&stop); seq++) {
    uintptr_t v = (uintptr_t)(seq << 1 | 1);
    for (int w = 1; w < WORDS; w++) __atomic_store_n(&words[w], (void *)v, __ATOMIC_RELAXED);
    for (int w = 1; w < WORDS; w++)
      if ((uintptr_t)__atomic_load_n(&words[w], __ATOMIC_RELAXED) != v)
        atomic_fetch_add(&mismatches, 1);
  }
  return NULL;
}

int main(void) {
  hl_heap *h = HEAP("verify=1", "page_size=4096", "compact=always");
  OK(h, hl_roots_add(h, words, WORDS, 0));
  /* an object alone on a page, held by the region's word 0 only */
  hl_ref objs[170];
  for (int i = 0; i < 170; i++) OK(h, hl_alloc(h, 40, 0, &objs[i]));
  uint8_t pat[40];
  memset(pat, 0x5a, sizeof pat);
  OK(h, hl_ref_write(h, objs[3], 0, pat, sizeof pat));
  hl_object_info info;
  OK(h, hl_ref_info(h, objs[3], &info));
  words[KEPT_WORD] = (void *)(uintptr_t)info.object;
  for (int i = 0; i < 170; i++) OK(h, hl_ref_release(h, objs[i]));
  hl_ref others[85];
  for (int i = 0; i < 85; i++) OK(h, hl_alloc(h, 40, 0, &others[i]));

  pthread_t t;
  CHECK(pthread_create(&t, NULL, writer, NULL) == 0, "pthread_create");
  /* (a third of the rounds under ThreadSanitizer: it checks the accesses, the
   * plain build the outcome) */
  for (int round = 0; round < TSAN_FEWER(ROUNDS); round++) {
    /* pages of which one object in 50 stays: the collection moves those */
    hl_ref r[400];
    for (int i = 0; i < 400; i++) OK(h, hl_alloc(h, 40, 0, &r[i]));
    for (int i = 0; i < 400; i++)
      if (i % 50) OK(h, hl_ref_release(h, r[i]));
    OK(h, hl_collect(h, 1, 1));
    for (int i = 0; i < 400; i += 50) OK(h, hl_ref_release(h, r[i]));
  }
  atomic_store(&stop, 1);
  pthread_join(t, NULL);

  hl_stats s = stats_of(h);
  CHECK(s.evacuated_objects >= (uint64_t)TSAN_FEWER(ROUNDS), "the scenario moved %" PRIu64 " objects",
        s.evacuated_objects);
  CHECK(atomic_load(&mismatches) == 0,
        "%lu words read back older values than the client had just written",
        (unsigned long)atomic_load(&mismatches));
  check_invariants(h);
  /* the object held by word 0 alone: alive, and where the word says */
  hl_enter(h);
  const uint8_t *obj = words[KEPT_WORD];
  CHECK(obj && hl_obj_size(obj) == 40, "word 0 holds %p, not the 40-byte object", (void *)obj);
  CHECK(memcmp(hl_obj_payload(obj), pat, sizeof pat) == 0, "the object's payload changed");
  hl_leave(h);
  for (int i = 0; i < 85; i++) OK(h, hl_ref_release(h, others[i]));
  OK(h, hl_roots_remove(h, words));
  hl_heap_free(h);
  return 0;
}
