/*
 * preload_workloads.c -- allocation-heavy programs for the LD_PRELOAD
 * benchmark (experiments/test_bench_preload.py; docs/performance.md).  Plain
 * malloc/free/realloc: the allocator is whatever the process was started on
 * (glibc, or libheaplab-malloc.so / libmimalloc.so / libjemalloc.so
 * preloaded).  Each prints a checksum of what it computed, equal on every
 * allocator, then its peak RSS (VmHWM: wait4's ru_maxrss would include the
 * parent's resident set, which the child shares between fork and exec).
 *
 *   bench-preload classes  N   size-class churn: a window of 50,000 live
 *                              blocks of 8..1024 bytes replaced at random
 *   bench-preload realloc  N   strings grown by realloc in small steps to
 *                              64 KiB .. 1 MiB, as builders and buffers do
 *   bench-preload server   N   a server-like mix: requests allocate a
 *                              dozen short-lived blocks and a few that join
 *                              a long-lived cache of ~100,000 entries,
 *                              evicted LRU-ish; occasional large buffers
 *   bench-preload xthreads N   8 threads: 4 producers hand blocks to 4
 *                              consumers that free them (every free
 *                              cross-thread), each also churning locally
 *   bench-preload local    N   8 threads, each its own size-class churn
 *                              (the classic larson/xmalloc-free shape)
 *   bench-preload largemix N   4 threads churning small blocks beside 2
 *                              churning blocks of 1..3 MiB (mmap and munmap
 *                              in every allocator that maps them), until
 *                              the 4 are done
 * N scales the work (1 = the benchmark's size; the test runs 0.05).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *(*volatile M)(size_t) = malloc;
static void (*volatile F)(void *) = free;
static void *(*volatile R)(void *, size_t) = realloc;

static uint64_t rng(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* A window of live blocks replaced at random, ops times: classes' sizes
 * (8..135 bytes, one in eight up to 1 KiB) or, small, 16..415 bytes. */
static uint64_t churn(size_t window, uint64_t ops, uint64_t seed, int small) {
  unsigned char **w = calloc(window, sizeof *w);
  uint64_t s = seed, sum = 0;
  for (uint64_t i = 0; i < ops; i++) {
    uint64_t r = rng(&s);
    size_t k = r % window;
    if (w[k]) {
      sum += w[k][0];
      F(w[k]);
    }
    size_t n = small ? 16 + (r >> 20) % 400 : 8 + (r >> 20) % ((r >> 40) % 8 == 0 ? 1024 : 128);
    w[k] = M(n);
    w[k][0] = (unsigned char)r;
    w[k][n - 1] = 1;
  }
  for (size_t k = 0; k < window; k++) F(w[k]);
  free(w);
  return sum;
}

static uint64_t classes(double scale, uint64_t seed) {
  return churn(50000, (uint64_t)(8e6 * scale), seed, 0);
}

static uint64_t reallocs(double scale) {
  uint64_t s = 7, sum = 0, rounds = (uint64_t)(600 * scale) + 1;
  for (uint64_t i = 0; i < rounds; i++) {
    size_t target = 65536 + rng(&s) % (1 << 20), n = 0, step = 16 + rng(&s) % 200;
    unsigned char *p = NULL;
    while (n < target) {
      p = R(p, n + step);
      memset(p + n, (int)(n & 0xff), step);
      n += step;
    }
    sum += p[n / 2] + n;
    F(p);
  }
  return sum;
}

typedef struct entry {
  struct entry *next;
  char *key, *val;
  size_t vlen;
} entry;

static uint64_t server(double scale) {
  enum { CACHE = 100000 };
  entry **cache = calloc(CACHE, sizeof *cache);
  uint64_t s = 11, sum = 0, requests = (uint64_t)(1.5e6 * scale);
  for (uint64_t q = 0; q < requests; q++) {
    uint64_t r = rng(&s);
    /* parse: a dozen short-lived pieces */
    char *tmp[12];
    for (int i = 0; i < 12; i++) {
      size_t n = 16 + (r >> (i * 4)) % 200;
      tmp[i] = M(n);
      tmp[i][0] = (char)i;
      tmp[i][n - 1] = 0;
    }
    /* a response buffer, sometimes large */
    size_t rb = (r % 64 == 0) ? 65536 + r % 200000 : 512 + r % 4096;
    char *resp = M(rb);
    memset(resp, 'x', 64);
    resp[rb - 1] = 0;
    /* one entry replaced in the cache */
    size_t k = (r >> 17) % CACHE;
    entry *e = cache[k];
    if (e) {
      sum += (unsigned char)e->val[0] + e->vlen;
      F(e->key);
      F(e->val);
      F(e);
    }
    e = M(sizeof *e);
    e->key = M(24);
    memcpy(e->key, "key:0123456789abcdefghi", 24);
    e->vlen = 32 + (r >> 33) % 900;
    e->val = M(e->vlen);
    memset(e->val, (int)(r & 0x7f), e->vlen);
    e->next = NULL;
    cache[k] = e;
    for (int i = 0; i < 12; i++) {
      sum += (unsigned char)tmp[i][0];
      F(tmp[i]);
    }
    sum += (unsigned char)resp[0];
    F(resp);
  }
  for (size_t k = 0; k < CACHE; k++)
    if (cache[k]) {
      F(cache[k]->key);
      F(cache[k]->val);
      F(cache[k]);
    }
  free(cache);
  return sum;
}

/* ---- threads ---- */

#define QCAP 4096
static void *queue[QCAP];
static int qh, qt, qn, producing;
static pthread_mutex_t ql = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qne = PTHREAD_COND_INITIALIZER, qnf = PTHREAD_COND_INITIALIZER;
static double g_scale;
static _Atomic uint64_t g_sum;

static void *producer(void *arg) {
  uint64_t s = (uintptr_t)arg * 977 + 1, n = (uint64_t)(1.5e6 * g_scale);
  void *batch[32];
  int nb = 0;
  for (uint64_t i = 0; i < n; i++) {
    uint64_t r = rng(&s);
    size_t sz = 16 + r % 480;
    unsigned char *p = M(sz);
    p[0] = (unsigned char)r;
    /* local churn too */
    void *t = M(8 + (r >> 32) % 256);
    F(t);
    batch[nb++] = p;
    if (nb == 32) {
      pthread_mutex_lock(&ql);
      while (qn + 32 > QCAP) pthread_cond_wait(&qnf, &ql);
      for (int k = 0; k < 32; k++) {
        queue[qt] = batch[k];
        qt = (qt + 1) % QCAP;
      }
      qn += 32;
      pthread_cond_signal(&qne);
      pthread_mutex_unlock(&ql);
      nb = 0;
    }
  }
  pthread_mutex_lock(&ql);
  for (int k = 0; k < nb; k++) {
    while (qn == QCAP) pthread_cond_wait(&qnf, &ql);
    queue[qt] = batch[k];
    qt = (qt + 1) % QCAP;
    qn++;
  }
  producing--;
  pthread_cond_broadcast(&qne);
  pthread_mutex_unlock(&ql);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  uint64_t sum = 0;
  void *batch[32];
  for (;;) {
    pthread_mutex_lock(&ql);
    while (qn == 0 && producing) pthread_cond_wait(&qne, &ql);
    if (qn == 0) {
      pthread_mutex_unlock(&ql);
      break;
    }
    int nb = qn < 32 ? qn : 32;
    for (int k = 0; k < nb; k++) {
      batch[k] = queue[qh];
      qh = (qh + 1) % QCAP;
    }
    qn -= nb;
    pthread_cond_broadcast(&qnf);
    pthread_mutex_unlock(&ql);
    for (int k = 0; k < nb; k++) {
      sum += ((unsigned char *)batch[k])[0];
      F(batch[k]);
    }
  }
  g_sum += sum;
  return NULL;
}

static void *local_churn(void *arg) {
  g_sum += classes(g_scale / 4, (uintptr_t)arg * 31 + 5);
  return NULL;
}

static _Atomic int g_small_left;

/* largemix: blocks of 1..3 MiB replaced at random, a page of each written,
 * while the small threads run */
static void *large_churn(void *arg) {
  uint64_t s = (uintptr_t)arg * 977 + 1;
  unsigned char *w[16] = {0};
  while (g_small_left > 0) {
    uint64_t r = rng(&s);
    int k = (int)(r % 16);
    F(w[k]);
    size_t n = ((size_t)1 << 20) + (r >> 20) % ((size_t)2 << 20);
    w[k] = M(n);
    memset(w[k], 1, 4096);
  }
  for (int k = 0; k < 16; k++) F(w[k]);
  return NULL;
}

static void *small_churn(void *arg) {
  g_sum += churn(4096, (uint64_t)(4e6 * g_scale), (uintptr_t)arg * 31 + 7, 1);
  g_small_left--;
  return NULL;
}

static uint64_t largemix(double scale) {
  pthread_t t[6];
  g_scale = scale;
  g_small_left = 4;
  for (int i = 0; i < 6; i++)
    pthread_create(&t[i], NULL, i < 2 ? large_churn : small_churn, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
  return g_sum;
}

static uint64_t threads(double scale, int cross) {
  pthread_t t[8];
  g_scale = scale;
  producing = 4;
  for (int i = 0; i < 8; i++)
    pthread_create(&t[i], NULL, cross ? (i < 4 ? producer : consumer) : local_churn,
                   (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
  return g_sum;
}

int main(int argc, char **argv) {
  double scale = argc > 2 ? atof(argv[2]) : 1.0;
  if (argc < 2 || scale <= 0 || scale > 100) {
    fprintf(stderr, "usage: %s classes|realloc|server|xthreads|local|largemix [SCALE]\n", argv[0]);
    return 2;
  }
  uint64_t sum;
  if (!strcmp(argv[1], "classes")) sum = classes(scale, 88172645463325252ull);
  else if (!strcmp(argv[1], "realloc")) sum = reallocs(scale);
  else if (!strcmp(argv[1], "server")) sum = server(scale);
  else if (!strcmp(argv[1], "xthreads")) sum = threads(scale, 1);
  else if (!strcmp(argv[1], "local")) sum = threads(scale, 0);
  else if (!strcmp(argv[1], "largemix")) sum = largemix(scale);
  else {
    fprintf(stderr, "%s: unknown workload '%s'\n", argv[0], argv[1]);
    return 2;
  }
  printf("%s %llu\n", argv[1], (unsigned long long)sum);
  FILE *st = fopen("/proc/self/status", "r");
  char line[256];
  long hwm = -1;
  while (st && fgets(line, sizeof line, st))
    if (sscanf(line, "VmHWM: %ld kB", &hwm) == 1) break;
  if (st) fclose(st);
  printf("peak_rss_kib %ld\n", hwm);
  return 0;
}
