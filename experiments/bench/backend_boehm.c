/*
 * backend_boehm.c -- the workloads on Boehm GC (libgc, Debian's build), used
 * the way a C program uses it: GC_malloc for objects holding pointers,
 * GC_malloc_atomic for payloads that hold none (heaplab's fill objects have
 * no reference slots either, so neither collector scans them), no GC_free,
 * roots found by scanning the stack and data conservatively.
 */
#include <inttypes.h>
#include <string.h>

/* Debian's libgc is built with threads, and so marks in parallel on every
 * core (GC_get_parallel is declared only under GC_THREADS). */
#define GC_THREADS
#include <gc/gc.h>

#include "bench.h"

const char bench_allocator[] = "boehm";

void backend_init(const bench_params *p, bench_out *o) {
  if (p->nopts) {
    bench_fail(o, "-o sets heaplab options; %s has none", bench_allocator);
    return;
  }
  GC_INIT();
  bench_note_u(o, "gc_version", GC_get_version());
  bench_note_u(o, "parallel_mark", (uint64_t)GC_get_parallel());
}

static void note_gc(bench_out *o, uint64_t gc_no0) {
  bench_note_u(o, "collections", GC_get_gc_no() - gc_no0);
  bench_note_u(o, "heap_size", GC_get_heap_size());
}

/* ---- binary-trees ---- */

/* Top-down, like heaplab's (a parent before its children). */
static bench_node *make(int d, uint64_t item) {
  bench_node *n = GC_malloc(sizeof *n);
  if (!n) return NULL;
  n->value = item;
  if (d > 0) {
    if (!(n->left = make(d - 1, BENCH_LEFT(item)))) return NULL;
    if (!(n->right = make(d - 1, BENCH_RIGHT(item)))) return NULL;
  }
  return n;
}

int backend_binary_trees(const bench_params *p, bench_out *o) {
  int max = bench_max_depth(p->depth);
  uint64_t gc0 = GC_get_gc_no();
  uint64_t t0 = bench_now_ns(), tp = t0, sum = 0, nodes = 0;
  bench_node *t = make(max + 1, 1);
  if (!t) goto oom;
  sum += bench_check(t);
  nodes += bench_tree_nodes(max + 1);
  t = NULL;
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
    }
    nodes += iters * bench_tree_nodes(d);
    bench_phase_end(o, NULL, d, tp);
  }
  tp = bench_now_ns();
  sum += bench_check(long_lived);
  bench_phase_end(o, "final", 0, tp);
  o->time_ns = bench_now_ns() - t0;
  o->checksum = sum;
  o->objects = nodes;
  note_gc(o, gc0);
  return 0;
oom:
  return bench_fail(o, "binary-trees: GC_malloc returned NULL");
}

/* ---- fill, pause ---- */

static void **fill(const bench_params *p, uint64_t *n_out, bench_out *o) {
  uint64_t size = p->obj_size, n = (p->fill_bytes + size - 1) / size;
  void **index = GC_malloc(n * sizeof(void *));
  if (!index) {
    bench_fail(o, "fill: GC_malloc of the index failed");
    return NULL;
  }
  for (uint64_t k = 0; k < n; k++) {
    void *obj = GC_malloc_atomic(size);
    if (!obj) {
      bench_fail(o, "fill: GC_malloc_atomic failed after %" PRIu64 " objects", k);
      return NULL;
    }
    memset(obj, bench_fill_byte(k), size);
    index[k] = obj;
  }
  *n_out = n;
  return index;
}

int backend_fill(const bench_params *p, bench_out *o) {
  if (p->warm) return bench_fail(o, "fill --warm: heaplab only");
  uint64_t n, gc0 = GC_get_gc_no();
  uint64_t t0 = bench_now_ns();
  void **index = fill(p, &n, o);
  if (!index) return 1;
  o->time_ns = bench_now_ns() - t0;
  note_gc(o, gc0);
  bench_index_checksum(index, n, p->obj_size, o);
  return 0;
}

int backend_pause(const bench_params *p, bench_out *o) {
  uint64_t n;
  uint64_t t0 = bench_now_ns();
  void **index = fill(p, &n, o);
  if (!index) return 1;
  bench_note_u(o, "fill_ns", bench_now_ns() - t0);
  uint64_t gc0 = GC_get_gc_no();
  t0 = bench_now_ns();
  GC_gcollect();
  o->time_ns = bench_now_ns() - t0;
  note_gc(o, gc0);
  t0 = bench_now_ns();
  GC_gcollect();
  bench_note_u(o, "second_pause_ns", bench_now_ns() - t0);
  bench_index_checksum(index, n, p->obj_size, o);
  return 0;
}
