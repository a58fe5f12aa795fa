/* libheaplab as a library of someone else's program, which may dlopen and
 * dlclose it (a plugin, a language module): a manual heap's thread caches
 * are freed at each thread's exit by a pthread key destructor in
 * libheaplab's code (manual.c, tc_destructor).  The key is process-wide and
 * nothing undoes it at dlclose, so
 *   unload    a thread that used a cache and exits after the program
 *             dlclosed the library ran that destructor in unmapped code
 *             (SIGSEGV in __nptl_deallocate_tsd);
 *   cycles    each dlopen/dlclose cycle made a key of its own and left it
 *             behind; after ~1,024 cycles pthread_key_create failed, unread,
 *             and heaplab stored its cache list under key 0 -- the program's
 *             own key, whose value it overwrote -- and the program could
 *             make no key itself;
 *   no_keys   the same when the program itself took every key first.
 * Now the code holding the destructor is pinned when the key is made (as the
 * helper threads pin it), and a key that cannot be made means no cache: the
 * heap allocates under its lock, and key 0 stays the program's.
 *
 * (A dl_test: dl_host.h.) */
#include <pthread.h>

#include "dl_host.h"

static hl_heap *manual_heap(void) {
  hl_options o;
  F(hl_options_defaults)(&o);
  o.mode = HL_MODE_MANUAL;
  o.reserve_bytes = 64 << 20;
  hl_heap *h;
  char err[256];
  CHECK(F(hl_heap_new)(&o, &h, err, sizeof err) == HL_OK, "hl_heap_new: %s", err);
  return h;
}

static void malloc_free(hl_heap *h) {
  void *p = F(hl_malloc)(h, 100);
  CHECK(p, "hl_malloc: %s", F(hl_heap_error)(h));
  memset(p, 1, 100);
  F(hl_free)(h, p);
}

/* ---- unload: a thread with a cache exits after the dlclose ---- */

static hl_heap *shared;
static sem_t used, go;

static void *worker(void *arg) {
  (void)arg;
  malloc_free(shared); /* (makes this thread's cache) */
  sem_post(&used);
  while (sem_wait(&go) != 0) {
  }
  return NULL; /* the key's destructor runs now */
}

static void unload(void) {
  dl_load();
  shared = manual_heap();
  sem_init(&used, 0, 0);
  sem_init(&go, 0, 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, worker, NULL) == 0, "pthread_create");
  while (sem_wait(&used) != 0) {
  }
  F(hl_heap_free)(shared);
  dl_unload();
  sem_post(&go);
  pthread_join(t, NULL);
}

/* ---- cycles: dlopen, a manual heap's cache, dlclose, 1,100 times ---- */

static int marker;

static void cycles(void) {
  pthread_key_t mine;
  CHECK(pthread_key_create(&mine, NULL) == 0, "the program's key");
  pthread_setspecific(mine, &marker);
  for (int i = 0; i < 1100; i++) {
    dl_load();
    hl_heap *h = manual_heap();
    malloc_free(h);
    F(hl_heap_free)(h);
    dl_unload();
    CHECK(pthread_getspecific(mine) == &marker, "cycle %d: the program's key %u holds %p", i,
          (unsigned)mine, pthread_getspecific(mine));
  }
  pthread_key_t k;
  int rc = pthread_key_create(&k, NULL);
  CHECK(rc == 0, "after 1,100 cycles the program can make no key: %s", strerror(rc));
}

/* ---- no_keys: the program took every key before heaplab's first cache ---- */

enum { MAX_KEYS = 2048 };
static int markers[MAX_KEYS];

static void no_keys(void) {
  pthread_key_t keys[MAX_KEYS];
  int n = 0;
  while (n < MAX_KEYS && pthread_key_create(&keys[n], NULL) == 0) {
    pthread_setspecific(keys[n], &markers[n]);
    n++;
  }
  CHECK(n < MAX_KEYS, "made %d keys and no limit", n);
  dl_load();
  hl_heap *h = manual_heap();
  void *blocks[1000];
  for (int i = 0; i < 1000; i++) {
    blocks[i] = F(hl_malloc)(h, 16 + (size_t)i % 500);
    CHECK(blocks[i], "hl_malloc %d without a key: %s", i, F(hl_heap_error)(h));
    memset(blocks[i], i & 0xff, 16);
  }
  for (int i = 0; i < 1000; i++) {
    CHECK(((unsigned char *)blocks[i])[15] == (i & 0xff), "block %d", i);
    F(hl_free)(h, blocks[i]);
  }
  CHECK(F(hl_heap_check)(h) == HL_OK, "%s", F(hl_heap_error)(h));
  for (int i = 0; i < n; i++)
    CHECK(pthread_getspecific(keys[i]) == &markers[i], "the program's key %u holds %p",
          (unsigned)keys[i], pthread_getspecific(keys[i]));
  F(hl_heap_free)(h);
}

int main(int argc, char **argv) {
  dl_args(argc, argv);
  dl_run("unload", unload);
  dl_run("cycles", cycles);
  dl_run("no_keys", no_keys);
  return 0;
}
