/* A mark at vm.max_map_count makes no mapping and keeps every live object,
 * with one marker (mark_threads=1) and with helpers.
 *
 * Why: the kernel refuses a new mapping only once a process's map count is
 * *past* the limit, so at exactly the limit one more mmap succeeds -- and
 * then brk refuses to grow the heap too, and the program's next malloc that
 * needs memory fails (docs/experiments/e6.md, "Parallel marking at the
 * limit").  The helpers' stacks already lived in the mark arena
 * (parallel_mark_maps_nothing); the marking thread's own stack came from
 * malloc, grown by realloc as a mark needed: 512 KiB at a heap's first
 * push, above glibc's mmap threshold, so a heap's first mark at the limit
 * mapped it.  Before the fix this test failed: the count was the limit + 1
 * after the collection, and a malloc of 1 MiB then failed.
 *
 * The process spends its own map budget (the sysctl is read, never
 * written): a filler mapping whose pages alternate between protections, one
 * VMA per page, as experiments/maplimit.py does.  Each heap holds a large
 * root object with ROOTS slots, each referring to a small object with one
 * slot, which refers to a leaf whose payload is its index; garbage leaves
 * of the same size class sit between them.  Tracing the root pushes ROOTS
 * objects at once: a stack of ROOTS words, far past any first allocation.
 * With helpers, their threads are started before the filler (creating a
 * thread maps its stack) and the heap collects at the limit until one took
 * part.  After the mark at the limit: the map count is unchanged, every leaf
 * still holds its index after the garbage's slots have been handed out
 * again (a leaf freed by mistake would be overwritten -- verify=true
 * poisons freed slots too), the mark counted exactly the live objects, and
 * malloc(1 MiB) works.  (Not under the sanitizers: their runtimes map
 * memory of their own at any time.) */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>

#include "check.h"
#include "map_limit.h"

enum { ROOTS = 300000 };

static long page_size;

/* The heap's graph: root (large, ROOTS slots) -> inner[i] (1 slot) ->
 * leaf[i] (payload i, ~i); a garbage leaf beside each. */
static hl_ref build(hl_heap *h) {
  hl_ref root;
  OK(h, hl_alloc(h, 0, ROOTS, &root));
  hl_object_info ri;
  OK(h, hl_ref_info(h, root, &ri));
  hl_enter(h);
  void *r = (void *)(uintptr_t)ri.object;
  for (uint64_t i = 0; i < ROOTS; i++) {
    void *in = hl_obj_new_in(h, r, i, 8, 1);
    CHECK(in, "inner %" PRIu64 ": %s", i, hl_heap_error(h));
    void *leaf = hl_obj_new_in(h, in, 0, 16, 0);
    CHECK(leaf, "leaf %" PRIu64 ": %s", i, hl_heap_error(h));
    uint64_t v[2] = {i, ~i};
    memcpy(hl_obj_payload(leaf), v, sizeof v);
    CHECK(hl_obj_new(h, 16, 0), "garbage: %s", hl_heap_error(h));
  }
  hl_leave(h);
  return root;
}

/* Every leaf holds its index; returns how many do not. */
static uint64_t damaged(hl_heap *h, hl_ref root) {
  hl_object_info ri;
  OK(h, hl_ref_info(h, root, &ri));
  hl_enter(h);
  void *r = (void *)(uintptr_t)ri.object;
  uint64_t bad = 0;
  for (uint64_t i = 0; i < ROOTS; i++) {
    void *in = hl_obj_get(r, i);
    void *leaf = in ? hl_obj_get(in, 0) : NULL;
    uint64_t v[2] = {0, 0};
    if (leaf) memcpy(v, hl_obj_payload(leaf), sizeof v);
    bad += !leaf || v[0] != i || v[1] != ~i;
  }
  hl_leave(h);
  return bad;
}

/* Start the process-wide helper threads now: creating a thread maps its
 * stack, which at the limit fails (the mark then runs alone). */
static void start_helpers(void) {
  hl_heap *w = HEAP("mark_threads=2");
  hl_ref r;
  OK(w, hl_fill(w, 64 << 20, 64, 0, &r));
  uint64_t used = 0;
  for (int i = 0; i < 6 && used < 2; i++) {
    OK(w, hl_collect(w, 1, 1));
    used = stats_of(w).mark_threads_used;
  }
  CHECK(used >= 2, "no helper took part in a parallel mark of 64 MiB");
  OK(w, hl_ref_release(w, r));
  hl_heap_free(w);
}

static void run(const char *threads, bool helpers) {
  long limit = max_map_count();
  /* (a trigger far above what build allocates: no cycle before the filler) */
  hl_heap *h = HEAP(threads, "verify=true", "warm_pages=0", "gc_trigger_bytes=1073741824",
                    "large_trigger_bytes=1073741824", "gc_growth_ratio=0");
  hl_ref root = build(h);
  uint64_t live = 1 + 2 * (uint64_t)ROOTS;
  CHECK(stats_of(h).cycles == 0, "%s: a cycle ran before the filler", threads);
  if (helpers) start_helpers();
  filler f = fill_to_limit(limit);
  long before = map_count(), after = before;
  CHECK(before == limit, "%s: the filler reached %ld maps, limit %ld", threads, before, limit);
  /* the heap's first mark, at the limit; with helpers, until one took part */
  int rc = HL_OK, marks = 0;
  uint64_t used = 0;
  do {
    rc = hl_collect(h, 1, 1);
    after = map_count();
    marks++;
    used = stats_of(h).mark_threads_used;
  } while (rc == HL_OK && after == before && helpers && used < 2 && marks < 6);
  void *probe = malloc(1 << 20); /* what the program does next */
  int probe_errno = errno;
  free(probe);
  munmap(f.base, f.bytes);
  CHECK(rc == HL_OK, "%s: collect at the limit: %s", threads, hl_heap_error(h));
  hl_stats s = stats_of(h);
  printf("%s: at %ld maps (limit %ld): %d mark(s) of %" PRIu64 " objects, %.1f ms, %" PRIu64
         " thread(s) in the last; maps after %ld, malloc(1 MiB) %s\n", threads, before, limit,
         marks, s.marked_objects, s.mark_ns / 1e6, used, after,
         probe ? "ok" : strerror(probe_errno));
  CHECK(after == before, "%s: the mark at the limit made %ld mapping(s)", threads, after - before);
  CHECK(probe, "%s: malloc(1 MiB) after the mark at the limit failed: %s", threads,
        strerror(probe_errno));
  CHECK(!helpers || used >= 2, "%s: no helper took part in %d marks at the limit", threads,
        marks);
  CHECK(s.marked_objects == live, "%s: the mark counted %" PRIu64 " objects, %" PRIu64 " live",
        threads, s.marked_objects, live);
  /* hand the garbage's slots out again, then read every leaf */
  hl_enter(h);
  for (uint64_t i = 0; i < ROOTS; i++) {
    uint64_t *p = hl_obj_payload(hl_obj_new(h, 16, 0));
    p[0] = p[1] = 0x5a5a5a5a5a5a5a5aull;
  }
  hl_leave(h);
  uint64_t bad = damaged(h, root);
  CHECK(bad == 0, "%s: %" PRIu64 " of %d live leaves lost after the mark at the limit", threads,
        bad, ROOTS);
  OK(h, hl_heap_check(h));
  OK(h, hl_ref_release(h, root));
  hl_heap_free(h);
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 77; /* skipped */
#endif
  page_size = sysconf(_SC_PAGESIZE);
  long limit = max_map_count();
  if (limit > 1100000) {
    printf("vm.max_map_count is %ld: too many maps to fill quickly; skipped\n", limit);
    return 77;
  }
  run("mark_threads=1", false);
  run("mark_threads=2", true);
  return 0;
}
