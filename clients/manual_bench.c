/*
 * heaplab-manual-bench -- the manual-mode hot path against the C library's
 * malloc, pattern by pattern, in one process: nanoseconds per operation and
 * the ratio.  The launchers spend their allocator time here.
 *
 *   heaplab-manual-bench [scale [pattern]]   (scale 1: a few seconds in all)
 *
 * Patterns (an operation is one malloc plus one free, or one realloc):
 *   lifo      malloc(64); free -- the same block every time
 *   batch     10000 blocks of 16..512 bytes, then free them all, in order
 *   random    a pool of 100000 blocks; replace a random one each step
 *   realloc   grow a block from 16 to 4096 bytes in 16-byte steps
 *   threads2  `random` in two threads, each freeing the other's blocks half
 *             of the time
 * Output: one JSON object per line, {"pattern", "heaplab_ns", "libc_ns", "ratio"}.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heaplab.h"

typedef struct alloc_api {
  void *(*malloc)(void *ctx, size_t n);
  void (*free)(void *ctx, void *p, size_t n);
  void *(*realloc)(void *ctx, void *p, size_t old, size_t n);
  void *ctx;
} alloc_api;

static void *h_malloc(void *c, size_t n) { return hl_malloc(c, n); }
static void h_free(void *c, void *p, size_t n) { hl_free_sized(c, p, n); }
static void *h_realloc(void *c, void *p, size_t o, size_t n) { return hl_realloc(c, p, o, n); }
static void *l_malloc(void *c, size_t n) { (void)c; return malloc(n); }
static void l_free(void *c, void *p, size_t n) { (void)c, (void)n; free(p); }
static void *l_realloc(void *c, void *p, size_t o, size_t n) { (void)c, (void)o; return realloc(p, n); }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t rnd(uint64_t *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  return *x;
}

static volatile uintptr_t sink;

static uint64_t lifo(alloc_api *a, uint64_t scale) {
  uint64_t n = 5000000 * scale;
  for (uint64_t i = 0; i < n; i++) {
    char *p = a->malloc(a->ctx, 64);
    p[0] = (char)i;
    sink += (uintptr_t)p;
    a->free(a->ctx, p, 64);
  }
  return n;
}

static uint64_t batch(alloc_api *a, uint64_t scale) {
  enum { N = 10000 };
  static void *p[N];
  static size_t sz[N];
  uint64_t x = 7, ops = 0;
  for (uint64_t r = 0; r < 150 * scale; r++) {
    for (int i = 0; i < N; i++) {
      sz[i] = 16 + rnd(&x) % 497;
      p[i] = a->malloc(a->ctx, sz[i]);
      *(char *)p[i] = 1;
    }
    for (int i = 0; i < N; i++) a->free(a->ctx, p[i], sz[i]);
    ops += N;
  }
  return ops;
}

typedef struct pool {
  void **p;
  size_t *sz;
  size_t n;
} pool;

static void pool_init(alloc_api *a, pool *pl, size_t n, uint64_t *x) {
  pl->n = n;
  pl->p = malloc(n * sizeof(void *));
  pl->sz = malloc(n * sizeof(size_t));
  for (size_t i = 0; i < n; i++) {
    pl->sz[i] = 16 + rnd(x) % 497;
    pl->p[i] = a->malloc(a->ctx, pl->sz[i]);
  }
}

static void pool_free(alloc_api *a, pool *pl) {
  for (size_t i = 0; i < pl->n; i++) a->free(a->ctx, pl->p[i], pl->sz[i]);
  free(pl->p);
  free(pl->sz);
}

static uint64_t random_steps(alloc_api *a, pool *pl, uint64_t steps, uint64_t *x) {
  for (uint64_t s = 0; s < steps; s++) {
    uint64_t r = rnd(x);
    size_t i = r % pl->n;
    a->free(a->ctx, pl->p[i], pl->sz[i]);
    pl->sz[i] = 16 + (r >> 32) % 497;
    pl->p[i] = a->malloc(a->ctx, pl->sz[i]);
    *(char *)pl->p[i] = 1;
  }
  return steps;
}

static uint64_t random_pat(alloc_api *a, uint64_t scale) {
  uint64_t x = 11;
  pool pl;
  pool_init(a, &pl, 100000, &x);
  uint64_t ops = random_steps(a, &pl, 2000000 * scale, &x);
  pool_free(a, &pl);
  return ops;
}

static uint64_t realloc_pat(alloc_api *a, uint64_t scale) {
  uint64_t ops = 0;
  for (uint64_t r = 0; r < 10000 * scale; r++) {
    size_t cur = 16;
    char *p = a->malloc(a->ctx, cur);
    for (size_t n = 32; n <= 4096; n += 16, ops++) {
      p = a->realloc(a->ctx, p, cur, n);
      p[n - 1] = 1;
      cur = n;
    }
    a->free(a->ctx, p, cur);
  }
  return ops;
}

/* Two threads share one array of slots; each replaces random slots, so
 * about half the frees are of the other thread's blocks. */
typedef struct shared {
  alloc_api *a;
  void **p;
  size_t *sz;
  pthread_mutex_t *locks;
  size_t n;
  uint64_t steps;
} shared;

static void *thread_body(void *arg) {
  shared *s = arg;
  uint64_t x = (uint64_t)(uintptr_t)&x | 1;
  for (uint64_t k = 0; k < s->steps; k++) {
    uint64_t r = rnd(&x);
    size_t i = r % s->n;
    size_t n = 16 + (r >> 32) % 497;
    void *q = s->a->malloc(s->a->ctx, n);
    *(char *)q = 1;
    pthread_mutex_lock(&s->locks[i & 255]);
    void *old = s->p[i];
    size_t on = s->sz[i];
    s->p[i] = q;
    s->sz[i] = n;
    pthread_mutex_unlock(&s->locks[i & 255]);
    s->a->free(s->a->ctx, old, on);
  }
  return NULL;
}

static uint64_t threads2(alloc_api *a, uint64_t scale) {
  shared s = {a, NULL, NULL, NULL, 100000, 1000000 * scale};
  s.p = malloc(s.n * sizeof(void *));
  s.sz = malloc(s.n * sizeof(size_t));
  s.locks = malloc(256 * sizeof(pthread_mutex_t));
  for (int i = 0; i < 256; i++) pthread_mutex_init(&s.locks[i], NULL);
  uint64_t x = 5;
  for (size_t i = 0; i < s.n; i++) {
    s.sz[i] = 16 + rnd(&x) % 497;
    s.p[i] = a->malloc(a->ctx, s.sz[i]);
  }
  pthread_t t[2];
  for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, thread_body, &s);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  for (size_t i = 0; i < s.n; i++) a->free(a->ctx, s.p[i], s.sz[i]);
  free(s.p);
  free(s.sz);
  free(s.locks);
  return 2 * s.steps;
}

typedef struct pattern {
  const char *name;
  uint64_t (*run)(alloc_api *, uint64_t);
} pattern;

int main(int argc, char **argv) {
  uint64_t scale = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
  if (scale < 1 || scale > 1000) {
    fprintf(stderr, "usage: %s [scale 1..1000]\n", argv[0]);
    return 2;
  }
  const char *only = argc > 2 ? argv[2] : NULL;
  hl_options o;
  hl_options_defaults(&o);
  char err[1024];
  /* the mode first: a manual heap ignores the collector's variables (their
   * HEAPLAB_GENERATIONAL=1 exported refused the bench: "needs mode=collected") */
  if (hl_options_set(&o, "mode", "manual", err, sizeof err) ||
      hl_options_from_env(&o, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", argv[0], err);
    return 2;
  }
  hl_heap *h;
  if (hl_heap_new(&o, &h, err, sizeof err)) {
    fprintf(stderr, "%s: %s\n", argv[0], err);
    return 2;
  }
  alloc_api hl = {h_malloc, h_free, h_realloc, h}, libc = {l_malloc, l_free, l_realloc, NULL};
  pattern pats[] = {{"lifo", lifo}, {"batch", batch}, {"random", random_pat},
                    {"realloc", realloc_pat}, {"threads2", threads2}};
  for (size_t i = 0; i < sizeof pats / sizeof pats[0]; i++) {
    if (only && strcmp(only, pats[i].name) != 0) continue;
    /* one untimed run of each first: the first pattern of the process ran
     * cold (its code, the heap's first pages, glibc's arena): lifo, first,
     * gave a median ratio of 1.094 over eight processes without this and
     * 0.977 with it, alternating (docs/performance.md, eighth session); then
     * best of three, alternating, so drift hits both alike */
    pats[i].run(&hl, scale);
    pats[i].run(&libc, scale);
    double best_h = 1e30, best_l = 1e30;
    for (int rep = 0; rep < 3; rep++) {
      double t0 = now_s();
      uint64_t nh = pats[i].run(&hl, scale);
      double t1 = now_s();
      uint64_t nl = pats[i].run(&libc, scale);
      double t2 = now_s();
      if ((t1 - t0) / nh < best_h) best_h = (t1 - t0) / nh;
      if ((t2 - t1) / nl < best_l) best_l = (t2 - t1) / nl;
    }
    printf("{\"pattern\": \"%s\", \"heaplab_ns\": %.2f, \"libc_ns\": %.2f, \"ratio\": %.3f}\n",
           pats[i].name, best_h * 1e9, best_l * 1e9, best_h / best_l);
    fflush(stdout);
  }
  hl_heap_free(h);
  return 0;
}
