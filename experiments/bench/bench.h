/*
 * bench.h -- what the benchmark's driver (bench_main.c) and its allocator
 * backends share.
 *
 * One executable per allocator (bench-heaplab, bench-boehm, bench-mimalloc,
 * bench-jemalloc, bench-glibc): jemalloc and mimalloc both replace malloc
 * when linked, so two of them in one process would measure whichever the
 * dynamic linker picked.  Each executable runs ONE workload once and prints
 * one JSON record on stdout; bench.py runs them in turn, each in a fresh
 * process, and reports medians and ratios measured side by side.
 *
 * The checksums are computed here, identically for every allocator, so a
 * record from one allocator can be compared with every other's: a tree's
 * checksum depends on every node's value and on the tree's shape, a fill's on
 * every payload byte of every object.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdint.h>
#include <string.h>

/* ---- parameters (command line; see bench_main.c usage) ---- */
#define BENCH_MAX_OPTS 32

typedef struct bench_params {
  int depth;               /* binary-trees: max depth (GCBench shape) */
  uint64_t fill_bytes;     /* fill, pause, churn, release: bytes of objects */
  uint64_t obj_size;       /* their payload size */
  int rounds;              /* churn: fill/drop rounds */
  int scattered;           /* release: 0 = every page empty, 1 = every other page */
  uint64_t keep;           /* compact: one object in `keep` survives the drop */
  int warm;                /* fill (heaplab): time a second fill into the pages of a first */
  int nopts;               /* heaplab options: name=value strings */
  const char *opts[BENCH_MAX_OPTS];
} bench_params;

/* ---- results: the record's figures and notes ---- */
#define BENCH_MAX_NOTES 64
typedef struct bench_note {
  const char *key;
  int is_float;
  uint64_t u;
  double d;
} bench_note;

/* binary-trees' phases, timed one by one inside the timed part: "stretch"
 * (the stretch tree built, checked, dropped), "long-lived" (built), "d4",
 * "d6", ... (all the trees of that depth), "final" (the long-lived tree
 * checked, dropped) -- where one allocator gains or loses against another.
 * The collectors add their counters' growth over the phase (gc = 1). */
#define BENCH_MAX_PHASES 20
typedef struct bench_phase {
  char name[16];
  uint64_t ns;
  int gc;                  /* 1: the counters below are the collector's */
  uint64_t cycles, minor_cycles, full_marks, gc_ns, promoted_bytes;
} bench_phase;

typedef struct bench_out {
  uint64_t time_ns;        /* the workload's timed part */
  uint64_t checksum;       /* 0 when the workload has none */
  uint64_t objects;        /* objects allocated (or checked) */
  int nnotes;
  bench_note notes[BENCH_MAX_NOTES];
  int nphases;
  bench_phase phases[BENCH_MAX_PHASES];
  char error[256];
} bench_out;

void bench_note_u(bench_out *o, const char *key, uint64_t v);
/* Record a binary-trees phase that started at t0 (bench_now_ns) and ends
 * now: name, or "d<depth>" when name is NULL.  Returns it (for a collector's
 * counters), or NULL when the table is full. */
bench_phase *bench_phase_end(bench_out *o, const char *name, int depth, uint64_t t0);
void bench_note_f(bench_out *o, const char *key, double v);
uint64_t bench_now_ns(void);
/* Set o->error (printf-style) and return 1, for `return bench_fail(...)`. */
int bench_fail(bench_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- the backend: each allocator's file defines these ---- */
extern const char bench_allocator[];       /* "heaplab", "boehm", ... */
/* Called once before any workload (GC_INIT, version notes...). */
void backend_init(const bench_params *p, bench_out *o);
/* Each returns 0, or 1 with o->error set; 2 = not supported here.  A
 * backend defines only the workloads it supports: bench_main.c has weak
 * definitions that return 2 for the others. */
int backend_binary_trees(const bench_params *p, bench_out *o);
int backend_fill(const bench_params *p, bench_out *o);
int backend_pause(const bench_params *p, bench_out *o);
int backend_churn(const bench_params *p, bench_out *o);
int backend_release(const bench_params *p, bench_out *o);
int backend_compact(const bench_params *p, bench_out *o);

/* ---- the checksums (the same code for every allocator) ---- */
static inline uint64_t bench_mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

/* A tree node's checksum from its value and its children's checksums
 * (0 for an absent child): depends on the shape, not only the values. */
static inline uint64_t bench_node_sum(uint64_t value, uint64_t left, uint64_t right) {
  return bench_mix(value) + left * 31 + (right ^ (right >> 7)) * 17;
}

/* The values of a tree built from `item`: a node's children carry 2i and 2i+1. */
#define BENCH_LEFT(i) ((i) * 2)
#define BENCH_RIGHT(i) ((i) * 2 + 1)

/* The payload byte pattern of the k-th object of a fill (the same as
 * heaplab's own hl_fill writes). */
static inline uint8_t bench_fill_byte(uint64_t k) { return (uint8_t)((k * 131 + 17) & 0xff); }

/* Order-independent: fills are summed over objects in whatever order the
 * allocator's index yields them. */
static inline uint64_t bench_payload_hash(const void *payload, uint64_t size) {
  const uint8_t *p = payload;
  uint64_t x = size * 0x9E3779B97F4A7C15ULL, i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    memcpy(&w, p + i, 8);
    x = (x ^ w) * 0x100000001b3ULL;
  }
  for (; i < size; i++) x = (x ^ p[i]) * 0x100000001b3ULL;
  return bench_mix(x);
}

/* ---- the GCBench / binary-trees schedule ----
 * min depth 4; a stretch tree of depth max+1; one long-lived tree of depth
 * max kept for the whole run; then for d = 4, 6, ..., max: 2^(max-d+4)
 * short-lived trees of depth d, each built, checked and dropped. */
#define BENCH_MIN_DEPTH 4
static inline int bench_max_depth(int depth) {
  return depth < BENCH_MIN_DEPTH + 2 ? BENCH_MIN_DEPTH + 2 : depth;
}
static inline uint64_t bench_iterations(int max, int d) {
  return (uint64_t)1 << (max - d + BENCH_MIN_DEPTH);
}
/* Nodes a tree of depth d has. */
static inline uint64_t bench_tree_nodes(int d) { return ((uint64_t)1 << (d + 1)) - 1; }

/* A tree node of the backends that allocate plain structs (Boehm and the
 * mallocs; heaplab's nodes are its own objects), and its checksum. */
typedef struct bench_node {
  struct bench_node *left, *right;
  uint64_t value;
} bench_node;

static inline uint64_t bench_check(const bench_node *n) {
  if (!n) return 0;
  return bench_node_sum(n->value, bench_check(n->left), bench_check(n->right));
}

/* A fill's checksum and object count, from an index of n objects of size
 * bytes. */
static inline void bench_index_checksum(void *const *index, uint64_t n, uint64_t size,
                                        bench_out *o) {
  uint64_t sum = 0;
  for (uint64_t k = 0; k < n; k++) sum += bench_payload_hash(index[k], size);
  o->checksum = sum;
  o->objects = n;
}

/* The page-fault floor and release floors need no allocator. */
int bench_floor(const bench_params *p, bench_out *o);

#endif
