/*
 * backend_heaplab.c -- the workloads on heaplab, through the C API a C client
 * uses: raw objects (hl_obj_new / hl_obj_new_in) under hl_enter, a shadow
 * stack registered with hl_roots_add, hl_fill for the bulk phases.
 *
 * Rooting: a tree's root node goes straight into a shadow-stack slot, and
 * every other node is allocated into its parent's slot (hl_obj_new_in), so no
 * object is ever unrooted while a cycle can run.  Dropping a tree is clearing
 * its shadow-stack slot; the collector does the rest.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bench.h"
#include "heaplab.h"

const char bench_allocator[] = "heaplab";

static hl_heap *H;
/* The shadow stack: [0] the long-lived tree, [1] the tree being built. */
static void *shadow[4];

void backend_init(const bench_params *p, bench_out *o) {
  hl_options opts;
  char err[256];
  hl_options_defaults(&opts);
  /* -o first, then the environment for the options -o did not name -- as the
   * bindings do (hl_options_from_env_except): the environment read first
   * refused a pair that -o made valid (HEAPLAB_YOUNG_BYTES=4m
   * HEAPLAB_YOUNG_MIN_BYTES=6m with -o young_bytes=8m: "exceeds young_bytes
   * 4194304"; the thirty-third note) */
  static char names[BENCH_MAX_OPTS][64];
  const char *skip[BENCH_MAX_OPTS];
  for (int i = 0; i < p->nopts; i++) {
    const char *eq = strchr(p->opts[i], '=');
    snprintf(names[i], sizeof names[i], "%.*s", (int)(eq - p->opts[i]), p->opts[i]);
    skip[i] = names[i];
    if (hl_options_set(&opts, names[i], eq + 1, err, sizeof err)) {
      bench_fail(o, "-o %s: %s", p->opts[i], err);
      return;
    }
  }
  if (hl_options_from_env_except(&opts, skip, (size_t)p->nopts, err, sizeof err)) {
    bench_fail(o, "%s", err);
    return;
  }
  if (hl_heap_new(&opts, &H, err, sizeof err)) {
    bench_fail(o, "hl_heap_new: %s", err);
    return;
  }
  if (hl_roots_add(H, shadow, sizeof shadow / sizeof shadow[0], 0)) {
    bench_fail(o, "hl_roots_add: %s", hl_heap_error(H));
    return;
  }
  bench_note_u(o, "page_release", (uint64_t)opts.page_release);
}

static void note_stats(bench_out *o, const hl_stats *a, const hl_stats *b) {
#define D(name) bench_note_u(o, #name, b->name - a->name)
  D(cycles);
  D(major_sweeps);
  D(gc_ns);
  D(mark_ns);
  D(minor_gc_ns);
  D(released_pages);
  D(release_calls);
  D(trims);
  D(trim_ns);
  D(syscalls);
  D(reused_pages);
  D(warm_reused_pages);
  D(fresh_pages);
  D(minor_cycles);
  D(major_full_mark);
  D(promoted_bytes);
  D(dirty_pages_scanned);
  D(whole_marks);
  D(remembered_pages_scanned);
  D(verify_failures);
  D(compact_ns);
  D(compactions);
  D(evacuated_pages);
  D(evacuated_objects);
  D(evacuated_bytes);
  D(pinned_objects);
  D(subpage_runs);
  D(subpage_restores);
  D(mark_steals);
  D(mark_helper_bytes);
  D(thp_splits);
  D(thp_chunks_released);
  D(thp_populated_chunks);
  D(thp_prefault_chunks);
  D(thp_prefault_waits);
  D(thp_prefault_wait_ns);
  D(thp_prefault_unused);
  D(populated_pages);
#undef D
  bench_note_u(o, "subpage_released_bytes", b->subpage_released_bytes);
  bench_note_u(o, "mark_threads_used", b->mark_threads_used);
  bench_note_u(o, "thp_enabled", b->thp_enabled);
  hl_footprint f;
  if (hl_footprint_get(&f) == HL_OK) bench_note_u(o, "anon_huge_bytes", f.anon_huge);
  bench_note_u(o, "tenured_pages", b->tenured_pages);
  bench_note_u(o, "max_pause_ns", b->max_pause_ns);
  bench_note_u(o, "gc_trigger_bytes", b->gc_trigger_bytes);
  bench_note_u(o, "total_pages", b->total_pages);
}

/* ---- binary-trees ---- */

/* Fill the node just allocated (in a rooted place) and build its subtrees
 * into its own slots. */
static int build(void *node, int d, uint64_t item) {
  *(uint64_t *)hl_obj_data(node) = item;
  if (d == 0) return 0;
  void *l = hl_obj_new_in(H, node, 0, sizeof(uint64_t), 2);
  if (!l || build(l, d - 1, BENCH_LEFT(item))) return 1;
  void *r = hl_obj_new_in(H, node, 1, sizeof(uint64_t), 2);
  if (!r || build(r, d - 1, BENCH_RIGHT(item))) return 1;
  return 0;
}

static int make_tree(int slot, int d, uint64_t item) {
  shadow[slot] = hl_obj_new(H, sizeof(uint64_t), 2);
  return !shadow[slot] || build(shadow[slot], d, item);
}

/* Slot and payload reads through heaplab.h's inline accessors, as a C
 * client's hot loop would (the checked hl_obj_get is a library call). */
static uint64_t check(void *n) {
  if (!n) return 0;
  void *const *s = hl_obj_slots(n);
  return bench_node_sum(*(const uint64_t *)hl_obj_data(n), check(s[0]), check(s[1]));
}

/* A phase that started at t0 with the counters a: its time and the
 * collector's work in it.  (hl_stats_get inside the timed part: ten calls a
 * run, each a few microseconds.) */
static void phase_end(bench_out *o, const char *name, int depth, uint64_t t0, hl_stats *a) {
  bench_phase *ph = bench_phase_end(o, name, depth, t0);
  hl_stats b;
  hl_stats_get(H, &b);
  if (ph) {
    ph->gc = 1;
    ph->cycles = b.cycles - a->cycles;
    ph->minor_cycles = b.minor_cycles - a->minor_cycles;
    ph->full_marks = ph->cycles - ph->minor_cycles;
    ph->gc_ns = b.gc_ns - a->gc_ns;
    ph->promoted_bytes = b.promoted_bytes - a->promoted_bytes;
  }
  *a = b;
}

int backend_binary_trees(const bench_params *p, bench_out *o) {
  int max = bench_max_depth(p->depth);
  hl_stats s0, s1, ps;
  hl_stats_get(H, &s0);
  ps = s0;
  hl_enter(H);
  uint64_t t0 = bench_now_ns(), tp = t0, sum = 0, nodes = 0;
  if (make_tree(1, max + 1, 1)) goto oom;
  sum += check(shadow[1]);
  nodes += bench_tree_nodes(max + 1);
  shadow[1] = NULL;
  phase_end(o, "stretch", 0, tp, &ps);
  tp = bench_now_ns();
  if (make_tree(0, max, 2)) goto oom;
  nodes += bench_tree_nodes(max);
  phase_end(o, "long-lived", 0, tp, &ps);
  for (int d = BENCH_MIN_DEPTH; d <= max; d += 2) {
    uint64_t iters = bench_iterations(max, d);
    tp = bench_now_ns();
    for (uint64_t i = 1; i <= iters; i++) {
      if (make_tree(1, d, i)) goto oom;
      sum += check(shadow[1]);
      shadow[1] = NULL;
    }
    nodes += iters * bench_tree_nodes(d);
    phase_end(o, NULL, d, tp, &ps);
  }
  tp = bench_now_ns();
  sum += check(shadow[0]);
  shadow[0] = NULL;
  phase_end(o, "final", 0, tp, &ps);
  o->time_ns = bench_now_ns() - t0;
  hl_leave(H);
  o->checksum = sum;
  o->objects = nodes;
  hl_stats_get(H, &s1);
  note_stats(o, &s0, &s1);
  return 0;
oom:
  hl_leave(H);
  return bench_fail(o, "binary-trees: allocation failed: %s", hl_heap_error(H));
}

/* ---- fills ---- */

/* Walk hl_fill's index: objects with slots are index nodes, the others are
 * the filled objects. */
static uint64_t fill_sum(const void *n, uint64_t *objects) {
  uint64_t refs = hl_obj_refs(n);
  if (refs == 0) {
    ++*objects;
    return bench_payload_hash(hl_obj_payload(n), hl_obj_size(n));
  }
  uint64_t s = 0;
  for (uint64_t i = 0; i < refs; i++) {
    const void *c = hl_obj_get(n, i);
    if (c) s += fill_sum(c, objects);
  }
  return s;
}

static void *object_of(hl_ref r) {
  hl_object_info info;
  return hl_ref_info(H, r, &info) ? NULL : (void *)(uintptr_t)info.object;
}

static int checksum_fill(hl_ref r, bench_out *o) {
  void *root = object_of(r);
  if (!root) return bench_fail(o, "fill: %s", hl_heap_error(H));
  o->objects = 0;
  o->checksum = fill_sum(root, &o->objects);
  return 0;
}

/* --warm: a first fill, dropped and collected (two full cycles), then the
 * timed fill into its pages: with page_release=0 they are all still
 * resident, so the timed part pays no fault -- the bound of the fill's own
 * work under any page supply (thp_ab.py --bound). */
static int fill_warm_up(const bench_params *p, bench_out *o) {
  hl_ref r;
  if (hl_fill(H, p->fill_bytes, p->obj_size, 0, &r) || hl_ref_release(H, r) ||
      hl_collect(H, 2, 1))
    return bench_fail(o, "fill --warm: the first fill: %s", hl_heap_error(H));
  uint64_t res = 0;
  hl_resident_bytes(H, &res);
  bench_note_u(o, "warm_resident_bytes", res);
  return 0;
}

int backend_fill(const bench_params *p, bench_out *o) {
  hl_stats s0, s1;
  hl_ref r;
  if (p->warm && fill_warm_up(p, o)) return 1;
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  hl_stats_get(H, &s0);
  uint64_t t0 = bench_now_ns();
  if (hl_fill(H, p->fill_bytes, p->obj_size, 0, &r))
    return bench_fail(o, "hl_fill: %s", hl_heap_error(H));
  o->time_ns = bench_now_ns() - t0;
  getrusage(RUSAGE_SELF, &ru1);
  bench_note_u(o, "timed_minflt", (uint64_t)(ru1.ru_minflt - ru0.ru_minflt));
  hl_stats_get(H, &s1);
  note_stats(o, &s0, &s1);
  return checksum_fill(r, o);
}

/* A full collection with the fill live: the pause a mutator would see. */
int backend_pause(const bench_params *p, bench_out *o) {
  hl_stats s0, s1;
  hl_ref r;
  uint64_t t0 = bench_now_ns();
  if (hl_fill(H, p->fill_bytes, p->obj_size, 0, &r))
    return bench_fail(o, "hl_fill: %s", hl_heap_error(H));
  bench_note_u(o, "fill_ns", bench_now_ns() - t0);
  hl_stats_get(H, &s0);
  t0 = bench_now_ns();
  if (hl_collect(H, 1, 1)) return bench_fail(o, "hl_collect: %s", hl_heap_error(H));
  o->time_ns = bench_now_ns() - t0;
  hl_stats_get(H, &s1);
  note_stats(o, &s0, &s1);
  /* a second one: the steady state (nothing left to sweep free) */
  t0 = bench_now_ns();
  hl_collect(H, 1, 1);
  bench_note_u(o, "second_pause_ns", bench_now_ns() - t0);
  return checksum_fill(r, o);
}

/* ---- fill/drop churn (page_release A/B) ---- */

int backend_churn(const bench_params *p, bench_out *o) {
  hl_stats s0, s1;
  hl_stats_get(H, &s0);
  uint64_t t0 = bench_now_ns(), untimed = 0;
  for (int k = 0; k < p->rounds; k++) {
    hl_ref r;
    if (hl_fill(H, p->fill_bytes, p->obj_size, 0, &r))
      return bench_fail(o, "hl_fill: %s", hl_heap_error(H));
    if (k == p->rounds - 1) {
      uint64_t c0 = bench_now_ns();
      if (checksum_fill(r, o)) return 1;
      untimed = bench_now_ns() - c0;
    }
    hl_ref_release(H, r);
    if (hl_collect(H, 1, -1)) return bench_fail(o, "hl_collect: %s", hl_heap_error(H));
  }
  o->time_ns = bench_now_ns() - t0 - untimed;
  hl_stats_get(H, &s1);
  note_stats(o, &s0, &s1);
  return 0;
}

/* ---- release cost ---- */

/* Per heap page: 1 when any of its OS pages is resident. */
static int residency(uint8_t *out, uint64_t npages, bench_out *o) {
  uint64_t base, bytes, psz;
  hl_options opts;
  hl_heap_range(H, &base, &bytes);
  hl_heap_options(H, &opts);
  psz = (uint64_t)opts.page_size;
  long os = sysconf(_SC_PAGESIZE);
  uint64_t per = psz / (uint64_t)os;
  unsigned char *vec = malloc(npages * per);
  if (!vec) return bench_fail(o, "release: out of memory");
  if (mincore((void *)(uintptr_t)base, npages * psz, vec)) {
    free(vec);
    return bench_fail(o, "release: mincore failed");
  }
  for (uint64_t i = 0; i < npages; i++) {
    out[i] = 0;
    for (uint64_t k = 0; k < per; k++) out[i] |= vec[i * per + k] & 1;
  }
  free(vec);
  return 0;
}

/* The raw cost of the advice on this machine, for reference: one call over
 * the whole range, and one call per heap page. */
static void madvise_floor(uint64_t bytes, uint64_t psz, int scattered, bench_out *o) {
  uint8_t *m = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return;
  madvise(m, bytes, MADV_NOHUGEPAGE);
  memset(m, 1, bytes);
  uint64_t t0 = bench_now_ns();
  madvise(m, bytes, MADV_DONTNEED);
  bench_note_u(o, "floor_one_call_ns", bench_now_ns() - t0);
  memset(m, 1, bytes);
  uint64_t calls = 0;
  t0 = bench_now_ns();
  for (uint64_t off = 0; off < bytes; off += psz * (scattered ? 2 : 1), calls++)
    madvise(m + off, psz, MADV_DONTNEED);
  bench_note_u(o, "floor_per_page_ns", bench_now_ns() - t0);
  bench_note_u(o, "floor_per_page_calls", calls);
  munmap(m, bytes);
}

int backend_release(const bench_params *p, bench_out *o) {
  hl_ref r;
  hl_options opts;
  hl_heap_options(H, &opts);
  uint64_t psz = (uint64_t)opts.page_size;
  if (hl_fill(H, p->fill_bytes, p->obj_size, 0, &r))
    return bench_fail(o, "hl_fill: %s", hl_heap_error(H));
  hl_collect(H, 1, 1);
  hl_stats s0, s1;
  hl_stats_get(H, &s0);
  uint64_t npages = s0.total_pages;
  uint8_t *before = malloc(npages), *after = malloc(npages);
  if (!before || !after || residency(before, npages, o)) return o->error[0] ? 1 : bench_fail(o, "oom");

  /* Drop every page's objects (contiguous) or every other page's
   * (scattered): the index has one root slot per page of objects. */
  hl_enter(H);
  void *root = object_of(r);
  uint64_t groups = hl_obj_refs(root);
  for (uint64_t i = 0; i < groups; i += p->scattered ? 2 : 1) hl_obj_set(root, i, NULL);
  hl_leave(H);

  /* Collect until a cycle releases nothing more (never a fixed count). */
  uint64_t t0 = bench_now_ns(), last = s0.released_pages;
  int cycles = 0;
  for (; cycles < 64; cycles++) {
    hl_stats st;
    hl_collect(H, 1, 1);
    hl_stats_get(H, &st);
    if (cycles > 0 && st.released_pages == last) break;
    last = st.released_pages;
  }
  o->time_ns = bench_now_ns() - t0;
  hl_stats_get(H, &s1);
  note_stats(o, &s0, &s1);
  bench_note_u(o, "collect_cycles", (uint64_t)cycles + 1);
  bench_note_u(o, "groups_dropped", p->scattered ? (groups + 1) / 2 : groups);

  /* Runs of heap pages that went from resident to released: the least
   * number of calls that could have released them. */
  if (residency(after, npages, o)) return 1;
  uint64_t released = 0, runs = 0;
  for (uint64_t i = 0; i < npages; i++) {
    int gone = before[i] && !after[i];
    released += gone;
    if (gone && (i == 0 || !(before[i - 1] && !after[i - 1]))) runs++;
  }
  bench_note_u(o, "released_runs", runs);
  bench_note_u(o, "released_bytes_mincore", released * psz);
  bench_note_u(o, "page_size", psz);
  free(before);
  free(after);
  madvise_floor(p->fill_bytes, psz, p->scattered, o);
  hl_ref_release(H, r);
  return 0;
}

/* ---- compaction pause (issue 18) ----
 * Fill, keep one object in `keep` (hl_thin), drop the fill: the pages are
 * sparse.  The timed part is the full collection that frees the dropped
 * objects -- and, with compact=sparse, evacuates the survivors: its stats
 * say how long the mark took (a full mark of the same heap) and how long
 * the evacuation, for how many bytes.  A second collection is the steady
 * state.  The checksum covers every survivor's payload. */
int backend_compact(const bench_params *p, bench_out *o) {
  hl_ref r, k;
  if (hl_fill(H, p->fill_bytes, p->obj_size, 0, &r))
    return bench_fail(o, "hl_fill: %s", hl_heap_error(H));
  if (hl_thin(H, r, p->keep, &k)) return bench_fail(o, "hl_thin: %s", hl_heap_error(H));
  hl_ref_release(H, r);
  hl_stats s0, s1, s2;
  hl_stats_get(H, &s0);
  uint64_t t0 = bench_now_ns();
  if (hl_collect(H, 1, 1)) return bench_fail(o, "hl_collect: %s", hl_heap_error(H));
  o->time_ns = bench_now_ns() - t0;
  hl_stats_get(H, &s1);
  note_stats(o, &s0, &s1);
  t0 = bench_now_ns();
  hl_collect(H, 1, 1);
  bench_note_u(o, "second_pause_ns", bench_now_ns() - t0);
  hl_stats_get(H, &s2);
  bench_note_u(o, "second_mark_ns", s2.mark_ns - s1.mark_ns);
  bench_note_u(o, "second_gc_ns", s2.gc_ns - s1.gc_ns);
  bench_note_u(o, "live_bytes", s2.small_live_bytes);
  return checksum_fill(k, o);
}
