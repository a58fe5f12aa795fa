/*
 * soak.c -- heaplab-soak: every experiment's workload shape, at once, across
 * threads, with random fault schedules and verify on; every object checked.
 *
 *   heaplab-soak [--duration S] [--threads N] [--seed X]
 *
 * One heap per shape, shared by every worker thread (N >= 4, default 4):
 *
 *   E1 fill/drop     fill 1-8 MiB, check its checksum, drop it, collect
 *   E2 partial       fill with stride 2-4 (partially live pages), major sweep
 *   E3 large churn   background collector, large pacing: hl_churn plus a ring
 *                    of large objects written and read back
 *   E4 restore       restore faults (always / sticky, EIO / ENOMEM), no warm
 *                    cache: every page released and reused through a failure
 *   E5 dump toggle   dump_toggle on: fill/drop, VMA count
 *   E6 EAGAIN        release refused with EAGAIN (always / every N), bounded
 *                    retry
 *   E8 manual        malloc/calloc/realloc/free of interpreter-like sizes,
 *                    blocks handed to other threads and freed there; one
 *                    heap with verify on, one with the thread caches (verify
 *                    turns them off)
 *   graph            (on E1's heap) objects with slots, set/get, raw
 *                    hl_obj_new_in under hl_enter, contents checked
 *
 * A chaos thread arms random fault schedules (any site, any mode, EAGAIN /
 * ENOMEM / EIO / EINVAL) on random heaps and disarms them; every round ends
 * with hl_heap_check.  Every object a thread owns is checked before it is
 * dropped (fills by checksum, objects and blocks byte for byte).
 *
 * Prints operations, faults fired, objects verified, lost (must be 0) and
 * the longest single call (max stall) per shape; exits 1 if anything was
 * lost or corrupted, a check failed or a call returned an error it may not.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "heaplab.h"

enum { E1, E2, E3, E4, E5, E6, E8, E8T, GRAPH, NSHAPE };
static const char *shape_name[NSHAPE] = {"E1 fill/drop", "E2 partial pages", "E3 large churn",
                                         "E4 restore faults", "E5 dump toggle", "E6 EAGAIN",
                                         "E8 manual (verify)", "E8 manual (tcache)", "graph"};
static hl_heap *heaps[NSHAPE];

typedef struct {
  _Atomic uint64_t rounds, ops, verified, refused, lost, max_stall_ns;
  const char *_Atomic max_stall_call; /* the call that took max_stall_ns (about) */
} shape_stats;
static shape_stats st[NSHAPE];
static _Atomic int stop; /* 1: workers stop; 2: the run is over */
static _Atomic uint64_t failures;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void failure(int shape, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void failure(int shape, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "soak: %s: ", shape_name[shape]);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  atomic_fetch_add(&failures, 1);
}

static void lost(int shape, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void lost(int shape, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "soak: %s: LOST: ", shape_name[shape]);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  atomic_fetch_add(&st[shape].lost, 1);
}

/* Time one call: the longest is the shape's max stall. */
#define TIMED(shape, expr)                                                     \
  ({                                                                           \
    uint64_t t0_ = now_ns();                                                   \
    __typeof__(expr) r_ = (expr);                                              \
    uint64_t d_ = now_ns() - t0_;                                              \
    uint64_t m_ = atomic_load(&st[shape].max_stall_ns);                        \
    while (d_ > m_ && !atomic_compare_exchange_weak(&st[shape].max_stall_ns, &m_, d_)) {} \
    if (d_ > m_) atomic_store(&st[shape].max_stall_call, #expr);               \
    atomic_fetch_add(&st[shape].ops, 1);                                       \
    r_;                                                                        \
  })

/* An error an operation may return under faults: out of memory, a syscall. */
static bool refusal(int shape, int rc, const char *what) {
  if (rc == HL_OK) return false;
  if (rc == HL_ENOMEM || rc == HL_ESYS) {
    atomic_fetch_add(&st[shape].refused, 1);
    return true;
  }
  failure(shape, "%s: %s: %s", what, hl_error_name(rc), hl_heap_error(heaps[shape]));
  return true;
}

typedef struct {
  uint64_t x;
} rng;
static uint64_t next(rng *r) {
  r->x ^= r->x << 13, r->x ^= r->x >> 7, r->x ^= r->x << 17;
  return r->x;
}
static uint64_t below(rng *r, uint64_t n) { return n ? next(r) % n : 0; }

static void pattern(uint8_t *p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; i++) p[i] = (uint8_t)(seed + i * 131 + (i >> 9));
}
static bool pattern_ok(const uint8_t *p, uint64_t n, uint64_t seed) {
  for (uint64_t i = 0; i < n; i++)
    if (p[i] != (uint8_t)(seed + i * 131 + (i >> 9))) return false;
  return true;
}

/* ---- the fill shapes: E1, E2, E4, E5, E6 ---- */

static void fill_round(int shape, rng *r) {
  hl_heap *h = heaps[shape];
  uint64_t total = (1 + below(r, 8)) << 20;
  uint64_t size = (uint64_t[]){16, 64, 256, 1000, 4000}[below(r, 5)];
  uint64_t stride = shape == E2 ? 2 + below(r, 3) : 1;
  hl_ref root = 0;
  int rc = TIMED(shape, hl_fill_stride(h, total, size, below(r, 2), stride, &root));
  if (refusal(shape, rc, "fill")) return;
  uint64_t sum = 0, n = 0, sum2 = 0, n2 = 0;
  if (refusal(shape, TIMED(shape, hl_ref_checksum(h, root, &sum, &n)), "checksum")) goto out;
  /* others allocate and collect meanwhile; the fill must not change */
  if (shape == E2) refusal(shape, TIMED(shape, hl_collect(h, 1, 1)), "collect");
  else if (below(r, 2)) refusal(shape, TIMED(shape, hl_collect(h, 1, -1)), "collect");
  if (refusal(shape, TIMED(shape, hl_ref_checksum(h, root, &sum2, &n2)), "checksum")) goto out;
  if (sum != sum2 || n != n2)
    lost(shape, "fill of %" PRIu64 " x %" PRIu64 " B: checksum %" PRIx64 "/%" PRIu64
         " objects became %" PRIx64 "/%" PRIu64, total, size, sum, n, sum2, n2);
  else
    atomic_fetch_add(&st[shape].verified, n2);
  if (shape == E5) {
    uint64_t vmas = 0;
    if (hl_vma_count(h, &vmas)) failure(shape, "vma_count: %s", hl_heap_error(h));
    atomic_fetch_add(&st[shape].ops, 1);
  }
out:
  if (hl_ref_release(h, root)) failure(shape, "release: %s", hl_heap_error(h));
  if (below(r, 2)) refusal(shape, TIMED(shape, hl_collect(h, 1, -1)), "collect");
  else refusal(shape, TIMED(shape, hl_trim(h)), "trim");
}

/* ---- graph: objects with slots on E1's heap ---- */

#define GN 64
static void graph_round(rng *r) {
  const int shape = GRAPH;
  hl_heap *h = heaps[E1];
  hl_ref ref[GN] = {0};
  uint64_t seed[GN], size[GN];
  int n = 0;
  for (int i = 0; i < GN; i++) {
    size[n] = below(r, 4) ? below(r, 300) : 600 + below(r, 20000);
    seed[n] = next(r);
    if (refusal(shape, TIMED(shape, hl_alloc(h, size[n], 2, &ref[n])), "alloc")) continue;
    uint8_t *buf = malloc(size[n] + 1);
    pattern(buf, size[n], seed[n]);
    if (hl_ref_write(h, ref[n], 0, buf, size[n])) failure(shape, "write: %s", hl_heap_error(h));
    free(buf);
    if (n && hl_ref_set(h, ref[n], 0, ref[below(r, n)])) failure(shape, "set: %s", hl_heap_error(h));
    n++;
  }
  /* a chain of raw objects in slot 1 of the first object, under hl_enter */
  uint64_t chain_seed = next(r);
  int chain = 0;
  if (n) {
    hl_enter(h);
    hl_object_info info;
    if (!hl_ref_info(h, ref[0], &info)) {
      void *parent = (void *)(uintptr_t)info.object;
      uint64_t slot = 1;
      for (int k = 0; k < 32; k++) {
        void *o = TIMED(shape, hl_obj_new_in(h, parent, slot, 48, 1));
        if (!o) break;
        pattern(hl_obj_payload(o), 48, chain_seed + (uint64_t)k);
        parent = o, slot = 0, chain++;
      }
    }
    hl_leave(h);
  }
  /* drop half the handles (their objects may stay reachable through slot 0);
   * object 0, which holds the raw chain, stays */
  for (int i = 1; i < n; i += 2) {
    if (hl_ref_release(h, ref[i])) failure(shape, "release: %s", hl_heap_error(h));
    ref[i] = 0;
  }
  refusal(shape, TIMED(shape, hl_collect(h, 1, (int)below(r, 3) - 1)), "collect");
  /* the raw chain: every link there, every payload intact */
  if (n) {
    hl_enter(h);
    hl_object_info info;
    if (hl_ref_info(h, ref[0], &info)) {
      failure(shape, "info: %s", hl_heap_error(h));
    } else {
      void *o = hl_obj_get((void *)(uintptr_t)info.object, 1);
      for (int k = 0; k < chain; k++) {
        if (!o) {
          lost(shape, "link %d of a chain of %d raw objects", k, chain);
          break;
        }
        if (!pattern_ok(hl_obj_payload(o), 48, chain_seed + (uint64_t)k))
          lost(shape, "raw object %d of a chain corrupted", k);
        else
          atomic_fetch_add(&st[shape].verified, 1);
        o = hl_obj_get(o, 0);
      }
    }
    hl_leave(h);
  }
  /* every object still held: contents intact */
  for (int i = 0; i < n; i++) {
    if (!ref[i]) continue;
    uint8_t *buf = malloc(size[i] + 1);
    if (hl_ref_read(h, ref[i], 0, buf, size[i])) failure(shape, "read: %s", hl_heap_error(h));
    else if (!pattern_ok(buf, size[i], seed[i])) lost(shape, "object of %" PRIu64 " bytes corrupted", size[i]);
    else atomic_fetch_add(&st[shape].verified, 1);
    free(buf);
    /* slot 0 names an earlier object, which must still be there */
    hl_ref c = 0;
    if (hl_ref_get(h, ref[i], 0, &c)) failure(shape, "get: %s", hl_heap_error(h));
    if (i && !c) lost(shape, "slot 0 of object %d is empty", i);
    if (c) {
      hl_ref_release(h, c);
      atomic_fetch_add(&st[shape].verified, 1);
    }
  }
  for (int i = 0; i < n; i++)
    if (ref[i]) hl_ref_release(h, ref[i]);
}

/* ---- E3: large churn with the background collector ---- */

#define RING 16
static void large_round(rng *r) {
  const int shape = E3;
  hl_heap *h = heaps[E3];
  hl_churn_result cr;
  int rc = TIMED(shape, hl_churn(h, 0.02, 32768, 2 << 20, 0, &cr));
  if (rc && rc != HL_ENOMEM) failure(shape, "churn: %s", hl_heap_error(h));
  hl_ref ring[RING] = {0};
  uint64_t seed[RING], size[RING];
  for (int i = 0; i < 64; i++) {
    int k = i % RING;
    if (ring[k]) {
      uint8_t *buf = malloc(size[k]);
      if (hl_ref_read(h, ring[k], 0, buf, size[k])) failure(shape, "read: %s", hl_heap_error(h));
      else if (!pattern_ok(buf, size[k], seed[k])) lost(shape, "large object of %" PRIu64 " B corrupted", size[k]);
      else atomic_fetch_add(&st[shape].verified, 1);
      free(buf);
      hl_ref_release(h, ring[k]);
      ring[k] = 0;
    }
    size[k] = 8192 + below(r, 120000);
    seed[k] = next(r);
    if (refusal(shape, TIMED(shape, hl_alloc(h, size[k], 0, &ring[k])), "alloc")) continue;
    uint8_t *buf = malloc(size[k]);
    pattern(buf, size[k], seed[k]);
    if (hl_ref_write(h, ring[k], 0, buf, size[k])) failure(shape, "write: %s", hl_heap_error(h));
    free(buf);
  }
  for (int k = 0; k < RING; k++)
    if (ring[k]) hl_ref_release(h, ring[k]);
}

/* ---- E8: manual mode, blocks crossing threads ---- */

typedef struct {
  uint8_t *p;
  uint64_t size, seed;
} block;

#define MAILBOX 1024
static struct {
  pthread_mutex_t lock;
  block b[MAILBOX];
  int n;
} mail[2] = {{PTHREAD_MUTEX_INITIALIZER, {{0}}, 0}, {PTHREAD_MUTEX_INITIALIZER, {{0}}, 0}};

static void check_and_free(int shape, block *b, rng *r) {
  hl_heap *h = heaps[shape];
  if (!pattern_ok(b->p, b->size, b->seed)) lost(shape, "block %p of %" PRIu64 " B corrupted", (void *)b->p, b->size);
  else atomic_fetch_add(&st[shape].verified, 1);
  if (below(r, 2)) TIMED(shape, (hl_free_sized(h, b->p, b->size), 0));
  else TIMED(shape, (hl_free(h, b->p), 0));
}

#define NB 512
static void manual_round(int shape, rng *r) {
  hl_heap *h = heaps[shape];
  int box = shape == E8 ? 0 : 1;
  block mine[NB];
  int n = 0;
  for (int i = 0; i < 4000; i++) {
    uint64_t k = below(r, 100);
    if (k < 55 && n < NB) {
      uint64_t size = below(r, 10) ? 8 + below(r, 120) : below(r, 4) ? below(r, 2048) : 4096 + below(r, 60000);
      uint8_t *p = below(r, 8) ? TIMED(shape, (uint8_t *)hl_malloc(h, size))
                               : TIMED(shape, (uint8_t *)hl_calloc(h, 1, size));
      if (!p) {
        atomic_fetch_add(&st[shape].refused, 1);
        continue;
      }
      mine[n].p = p, mine[n].size = size, mine[n].seed = next(r);
      pattern(p, size, mine[n].seed);
      n++;
    } else if (k < 85 && n) {
      int j = (int)below(r, (uint64_t)n);
      check_and_free(shape, &mine[j], r);
      mine[j] = mine[--n];
    } else if (k < 95 && n) {
      /* realloc keeps the contents */
      int j = (int)below(r, (uint64_t)n);
      uint64_t ns = 1 + below(r, 3000);
      if (!pattern_ok(mine[j].p, mine[j].size, mine[j].seed)) {
        lost(shape, "block %p corrupted before realloc", (void *)mine[j].p);
        continue;
      }
      uint8_t *p = TIMED(shape, (uint8_t *)hl_realloc(h, mine[j].p, mine[j].size, ns));
      if (!p) {
        atomic_fetch_add(&st[shape].refused, 1);
        continue;
      }
      uint64_t keep = ns < mine[j].size ? ns : mine[j].size;
      if (!pattern_ok(p, keep, mine[j].seed)) lost(shape, "realloc lost the contents");
      else atomic_fetch_add(&st[shape].verified, 1);
      mine[j].p = p, mine[j].size = ns, mine[j].seed = next(r);
      pattern(p, ns, mine[j].seed);
    } else if (n) {
      /* hand a block to another thread; free one another thread handed over */
      int j = (int)below(r, (uint64_t)n);
      pthread_mutex_lock(&mail[box].lock);
      block got = {0};
      if (mail[box].n && below(r, 2)) got = mail[box].b[--mail[box].n];
      if (mail[box].n < MAILBOX) {
        mail[box].b[mail[box].n++] = mine[j];
        mine[j] = mine[--n];
      }
      pthread_mutex_unlock(&mail[box].lock);
      if (got.p) check_and_free(shape, &got, r);
    }
  }
  for (int j = 0; j < n; j++) check_and_free(shape, &mine[j], r);
  if (below(r, 2)) hl_thread_flush(h);
  if (below(r, 4) == 0) refusal(shape, TIMED(shape, hl_trim(h)), "trim");
}

/* ---- threads ---- */

static uint64_t base_seed;

static void *worker(void *arg) {
  rng r = {base_seed ^ (0x9E3779B97F4A7C15ull * (uint64_t)(uintptr_t)arg) ^ 1};
  while (!atomic_load(&stop)) {
    int shape = (int)below(&r, NSHAPE);
    switch (shape) {
    case E3: large_round(&r); break;
    case E8: case E8T: manual_round(shape, &r); break;
    case GRAPH: graph_round(&r); break;
    default: fill_round(shape, &r);
    }
    atomic_fetch_add(&st[shape].rounds, 1);
    hl_heap *h = heaps[shape == GRAPH ? E1 : shape];
    if (hl_heap_check(h)) failure(shape, "heap check: %s", hl_heap_error(h));
  }
  /* give the manual heaps' caches back before the heaps are checked */
  hl_thread_flush(heaps[E8]);
  hl_thread_flush(heaps[E8T]);
  return NULL;
}

/* Random fault schedules: any site, any mode, on any heap; the shapes' own
 * schedules (E4, E6) are put back now and then. */
static void own_faults(int shape, rng *r) {
  hl_heap *h = heaps[shape];
  if (shape == E4) {
    if (below(r, 2)) hl_inject(h, HL_SITE_restore, HL_FAULT_always, 0, below(r, 2) ? EIO : ENOMEM);
    else hl_inject(h, HL_SITE_restore, HL_FAULT_sticky, (int64_t)below(r, 64), EIO);
  } else if (shape == E6) {
    if (below(r, 2)) hl_inject(h, HL_SITE_release, HL_FAULT_always, 0, EAGAIN);
    else hl_inject(h, HL_SITE_release, HL_FAULT_every, 1 + (int64_t)below(r, 5), EAGAIN);
  }
}

static void *chaos(void *arg) {
  rng r = {base_seed ^ 0xC4A05};
  (void)arg;
  static const int errs[] = {EAGAIN, ENOMEM, EIO, EINVAL};
  while (!atomic_load(&stop)) {
    usleep(20000);
    int shape = (int)below(&r, NSHAPE);
    if (shape == GRAPH) shape = E1;
    hl_heap *h = heaps[shape];
    int site = (int)below(&r, HL_SITE_COUNT);
    if (site == HL_SITE_reserve) continue;
    int mode = (int)below(&r, HL_FAULT_MODE_COUNT);
    int64_t arg = mode == HL_FAULT_every ? 1 + (int64_t)below(&r, 8) : (int64_t)below(&r, 32);
    if (hl_inject(h, site, mode, arg, errs[below(&r, 4)]))
      failure(shape, "inject: %s", hl_heap_error(h));
    if (below(&r, 8) == 0) {
      for (int s = 0; s < HL_SITE_COUNT; s++) hl_inject(h, s, HL_FAULT_off, 0, 0);
      own_faults(shape, &r);
    }
  }
  return NULL;
}

static hl_heap *make(const char *opts) {
  hl_options o;
  hl_options_defaults(&o);
  char buf[1024], err[256];
  snprintf(buf, sizeof buf, "%s", opts);
  for (char *kv = strtok(buf, " "); kv; kv = strtok(NULL, " ")) {
    char *eq = strchr(kv, '=');
    if (!eq) continue;
    *eq = 0;
    if (hl_options_set(&o, kv, eq + 1, err, sizeof err)) {
      fprintf(stderr, "soak: option %s: %s\n", kv, err);
      exit(2);
    }
  }
  hl_heap *h;
  if (hl_heap_new(&o, &h, err, sizeof err)) {
    fprintf(stderr, "soak: heap (%s): %s\n", opts, err);
    exit(2);
  }
  return h;
}

static void *watchdog(void *arg) {
  double limit = *(double *)arg;
  uint64_t end = now_ns() + (uint64_t)(limit * 1e9);
  while (now_ns() < end) {
    sleep(1);
    if (atomic_load(&stop) == 2) return NULL;
  }
  fprintf(stderr, "soak: still running %.0f s after the end: a hang\n", limit);
  abort();
}

int main(int argc, char **argv) {
  double duration = 30;
  int nthreads = 4;
  base_seed = (uint64_t)now_ns();
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--duration") && i + 1 < argc) duration = atof(argv[++i]);
    else if (!strcmp(argv[i], "--threads") && i + 1 < argc) nthreads = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc) base_seed = strtoull(argv[++i], NULL, 0);
    else {
      fprintf(stderr, "usage: heaplab-soak [--duration S] [--threads N >= 4] [--seed X]\n");
      return 2;
    }
  }
  if (!(duration > 0) || nthreads < 4 || nthreads > 256) {
    fprintf(stderr, "soak: --duration must be > 0 and --threads in [4, 256]\n");
    return 2;
  }
  const char *common = "verify=true reserve_bytes=1g syscall_retry_max=3 syscall_retry_backoff_us=100 "
                       "gc_trigger_bytes=2m gc_trigger_min_bytes=1m events_capacity=256";
  char o[600];
#define MAKE(shape, extra) (snprintf(o, sizeof o, "%s %s", common, extra), heaps[shape] = make(o))
  MAKE(E1, "page_release=true warm_pages=16");
  MAKE(E2, "quiet_counts_large=true major_sweep=auto");
  MAKE(E3, "collector=background large_pacing=true large_trigger_bytes=4m heap_limit_bytes=256m "
           "pacing_max_wait_ms=200");
  MAKE(E4, "warm_pages=0 warm_demand_trims=0 reuse_attempts=4");
  MAKE(E5, "dump_toggle=true warm_pages=0 warm_demand_trims=0");
  MAKE(E6, "warm_pages=0 warm_demand_trims=0 syscall_retry_max=5");
  MAKE(E8, "mode=manual warm_pages=4");
  heaps[E8T] = make("mode=manual warm_pages=4 verify=false reserve_bytes=1g syscall_retry_max=3 "
                    "syscall_retry_backoff_us=100");
  heaps[GRAPH] = heaps[E1];
  rng r = {base_seed | 1};
  own_faults(E4, &r);
  own_faults(E6, &r);

  printf("soak: %.0f s, %d threads, seed 0x%" PRIx64 " (heaplab-soak --seed 0x%" PRIx64
         " repeats the schedules, not the interleaving)\n", duration, nthreads, base_seed, base_seed);
  fflush(stdout);
  double wd = duration + 120;
  pthread_t w, c, t[256];
  pthread_create(&w, NULL, watchdog, &wd);
  for (int i = 0; i < nthreads; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
  pthread_create(&c, NULL, chaos, NULL);
  uint64_t end = now_ns() + (uint64_t)(duration * 1e9);
  while (now_ns() < end) usleep(100000);
  atomic_store(&stop, 1);
  for (int i = 0; i < nthreads; i++) pthread_join(t[i], NULL);
  pthread_join(c, NULL);

  /* the end: every heap disarmed, checked, its faults counted */
  uint64_t faults = 0;
  for (int s = 0; s < NSHAPE; s++) {
    if (s == GRAPH) continue;
    hl_heap *h = heaps[s];
    for (int k = 0; k < HL_SITE_COUNT; k++) hl_inject(h, k, HL_FAULT_off, 0, 0);
    if (s == E8 || s == E8T) {
      /* blocks left in the mailboxes: checked and freed here */
      int box = s == E8 ? 0 : 1;
      for (int i = 0; i < mail[box].n; i++) check_and_free(s, &mail[box].b[i], &r);
      mail[box].n = 0;
      hl_thread_flush(h);
    } else {
      refusal(s, hl_collect(h, 1, 1), "collect");
    }
    if (hl_heap_check(h)) failure(s, "final heap check: %s", hl_heap_error(h));
    hl_stats hs;
    hl_stats_get(h, &hs);
    faults += hs.faults_fired;
    if (hs.verify_failures) failure(s, "%" PRIu64 " cycles failed verification", hs.verify_failures);
    if (s != E8 && s != E8T && hs.handles) failure(s, "%" PRIu64 " handles left", hs.handles);
  }

  uint64_t ops = 0, ver = 0, lostn = 0, stall = 0;
  int stall_at = 0;
  printf("%-20s %8s %10s %12s %8s %5s %12s\n", "shape", "rounds", "operations", "verified",
         "refused", "lost", "max stall ms");
  for (int s = 0; s < NSHAPE; s++) {
    printf("%-20s %8" PRIu64 " %10" PRIu64 " %12" PRIu64 " %8" PRIu64 " %5" PRIu64 " %12.1f\n",
           shape_name[s], st[s].rounds, st[s].ops, st[s].verified, st[s].refused, st[s].lost,
           (double)st[s].max_stall_ns / 1e6);
    ops += st[s].ops, ver += st[s].verified, lostn += st[s].lost;
    if (st[s].max_stall_ns > stall) stall = st[s].max_stall_ns, stall_at = s;
  }
  const char *call = atomic_load(&st[stall_at].max_stall_call);
  printf("soak: operations %" PRIu64 ", faults fired %" PRIu64 ", objects verified %" PRIu64
         ", %" PRIu64 " lost, max stall %.1f ms (%s: %s), %" PRIu64 " failures\n",
         ops, faults, ver, lostn, (double)stall / 1e6, shape_name[stall_at], call ? call : "-",
         atomic_load(&failures));
  for (int s = 0; s < NSHAPE; s++)
    if (s != GRAPH) hl_heap_free(heaps[s]);
  atomic_store(&stop, 2);
  pthread_join(w, NULL);
  bool ok = lostn == 0 && atomic_load(&failures) == 0 && ver > 0 && faults > 0;
  if (!ok && (ver == 0 || faults == 0))
    fprintf(stderr, "soak: nothing was verified or no fault fired: the run proves nothing\n");
  return ok ? 0 : 1;
}
