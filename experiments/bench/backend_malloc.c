/*
 * backend_malloc.c -- the workloads on an explicit malloc/free: glibc's,
 * jemalloc's or mimalloc's, chosen at build time (one executable each; see
 * bench.h for why).
 *
 *   BENCH_MIMALLOC  calls mi_malloc / mi_free (mimalloc's own API)
 *   BENCH_JEMALLOC  calls malloc / free, which libjemalloc replaces (Debian's
 *                   build has no je_ prefix); mallctl("version") proves it
 *   neither         glibc malloc
 *
 * Trees are freed explicitly, children before their parent.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#if defined(BENCH_MIMALLOC)
#include <mimalloc.h>
#define ALLOC(n) mi_malloc(n)
#define FREE(p) mi_free(p)
const char bench_allocator[] = "mimalloc";
#elif defined(BENCH_JEMALLOC)
#include <jemalloc/jemalloc.h>
#define ALLOC(n) malloc(n)
#define FREE(p) free(p)
const char bench_allocator[] = "jemalloc";
#else
#include <gnu/libc-version.h>
#define ALLOC(n) malloc(n)
#define FREE(p) free(p)
const char bench_allocator[] = "glibc";
#endif

void backend_init(const bench_params *p, bench_out *o) {
  if (p->nopts) {
    bench_fail(o, "-o sets heaplab options; %s has none", bench_allocator);
    return;
  }
#if defined(BENCH_MIMALLOC)
  bench_note_u(o, "mi_version", (uint64_t)mi_version());
#elif defined(BENCH_JEMALLOC)
  const char *v = NULL;
  size_t len = sizeof v;
  if (mallctl("version", &v, &len, NULL, 0) || !v) {
    bench_fail(o, "jemalloc is not the malloc of this process (mallctl failed)");
    return;
  }
  /* "5.3.0-0-g54eaed1d..." -> 50300 */
  unsigned a = 0, b = 0, c = 0;
  sscanf(v, "%u.%u.%u", &a, &b, &c);
  bench_note_u(o, "je_version", a * 10000u + b * 100u + c);
#else
  unsigned a = 0, b = 0;
  sscanf(gnu_get_libc_version(), "%u.%u", &a, &b);
  bench_note_u(o, "glibc_version", a * 100u + b);
#endif
}

/* ---- binary-trees ---- */

static bench_node *make(int d, uint64_t item) {
  bench_node *n = ALLOC(sizeof *n);
  if (!n) return NULL;
  n->value = item;
  n->left = n->right = NULL;
  if (d > 0) {
    if (!(n->left = make(d - 1, BENCH_LEFT(item)))) return NULL;
    if (!(n->right = make(d - 1, BENCH_RIGHT(item)))) return NULL;
  }
  return n;
}

static void drop(bench_node *n) {
  if (!n) return;
  drop(n->left);
  drop(n->right);
  FREE(n);
}

int backend_binary_trees(const bench_params *p, bench_out *o) {
  int max = bench_max_depth(p->depth);
  uint64_t t0 = bench_now_ns(), tp = t0, sum = 0, nodes = 0;
  bench_node *t = make(max + 1, 1);
  if (!t) goto oom;
  sum += bench_check(t);
  drop(t);
  nodes += bench_tree_nodes(max + 1);
  bench_phase_end(o, "stretch", 0, tp);
  tp = bench_now_ns();
  bench_node *long_lived = make(max, 2);
  if (!long_lived) goto oom;
  nodes += bench_tree_nodes(max);
  bench_phase_end(o, "long-lived", 0, tp);
  for (int d = BENCH_MIN_DEPTH; d <= max; d += 2) {
    uint64_t iters = bench_iterations(max, d);
    tp = bench_now_ns();
    for (uint64_t i = 1; i <= iters; i++) {
      t = make(d, i);
      if (!t) goto oom;
      sum += bench_check(t);
      drop(t);
    }
    nodes += iters * bench_tree_nodes(d);
    bench_phase_end(o, NULL, d, tp);
  }
  tp = bench_now_ns();
  sum += bench_check(long_lived);
  drop(long_lived);
  bench_phase_end(o, "final", 0, tp);
  o->time_ns = bench_now_ns() - t0;
  o->checksum = sum;
  o->objects = nodes;
  return 0;
oom:
  return bench_fail(o, "binary-trees: %s returned NULL", bench_allocator);
}

/* ---- fill ---- */

int backend_fill(const bench_params *p, bench_out *o) {
  if (p->warm) return bench_fail(o, "fill --warm: heaplab only");
  uint64_t size = p->obj_size, n = (p->fill_bytes + size - 1) / size;
  uint64_t t0 = bench_now_ns();
  void **index = ALLOC(n * sizeof(void *));
  if (!index) return bench_fail(o, "fill: the index allocation failed");
  for (uint64_t k = 0; k < n; k++) {
    void *obj = ALLOC(size);
    if (!obj) return bench_fail(o, "fill: allocation failed after %" PRIu64 " objects", k);
    memset(obj, bench_fill_byte(k), size);
    index[k] = obj;
  }
  o->time_ns = bench_now_ns() - t0;
  bench_index_checksum(index, n, size, o);
  for (uint64_t k = 0; k < n; k++) FREE(index[k]);
  FREE(index);
  return 0;
}

/* Pauses, churn and release cost are about collectors and heaplab's pages:
 * not defined here (bench_main.c's weak definitions say so). */
