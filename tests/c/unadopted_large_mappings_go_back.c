/* A large object's mapping the heap could not adopt goes back: when the
 * large set's table cannot grow (its calloc refused) right after the mmap
 * of the block succeeded, hl__large_alloc unmaps the fresh mapping -- or,
 * when munmap refuses it (vm.max_map_count), gives its pages but the first
 * back and puts the range on the heap's pending list, as a dead object's
 * refused range (large.c, unmap_or_pend).  The allocation fails with
 * HL_ENOMEM saying what was refused -- "no memory to track a large object
 * of N bytes: the heap's set of large blocks could not grow" (it said "the
 * system allocator refused N bytes", which had made them: h42cov) --
 * nothing is charged, hl_heap_check passes, and hl_trim unmaps the pending
 * ranges once munmap agrees.
 *
 * No test reached unmap_or_pend before (h41cov, h42cov): no fault site is a
 * malloc, and RLIMIT_AS would need ~32k mappings before the table's calloc
 * fails and the block's mmap does not.  The test is the system instead: it
 * defines calloc, mmap and munmap (the core's calls resolve to them, as in
 * collected_large_syscalls_outside_the_lock).  While armed, each mmap of
 * BIG bytes or more is recorded and the next calloc is refused -- the
 * large set's first growth (1024 slots) comes next, nothing else calls
 * calloc between them.  hl_alloc then tries twice (a major cycle between:
 * collect_for_memory), so two mappings are made and neither adopted.
 *   1. munmap agrees: each mapping is unmapped at once, by its own length.
 *   2. munmap refuses the recorded mappings (ENOMEM): both are pending
 *      (event large_unmap_pending: refused 2, pending 2), hl_heap_check
 *      passes; with munmap agreeing again hl_trim unmaps both (unmapped 2,
 *      pending 0) and mincore finds the range gone.
 * Each heap then allocates the same object (nothing refused) and frees it.
 *   3. a manual heap's large block (the system malloc's, not a mapping of
 *      its own) whose set's first table, calloc(1024, 8), is refused: NULL,
 *      the same message, nothing live; the next malloc works.
 *   4. a collected heap's block from the system malloc (large_map_bytes=0)
 *      whose set's table is refused: HL_ENOMEM, the same message, the block
 *      freed (the malloc's bytes in use as before).
 * Not under the sanitizers: their runtimes intercept these calls. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#include "check.h"

extern void *__libc_calloc(size_t, size_t);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
int main(void) { return 77; /* skipped */ }
#else
enum { BIG = 1 << 20, MAX_MAPS = 8 };

static atomic_int armed;         /* 1: record BIG mappings, refuse the calloc after each */
static atomic_int refuse_calloc; /* the next calloc fails */
static atomic_int refuse_munmap; /* munmap of a recorded mapping fails (ENOMEM) */
static atomic_int refuse_set_growth; /* calloc(1024, 8), the large set's first table, fails */
static atomic_int calloc_refused;
static void *maps[MAX_MAPS];
static size_t map_len[MAX_MAPS];
static atomic_int nmaps;
static atomic_int unmapped[MAX_MAPS], munmap_refused;

void *calloc(size_t n, size_t size) {
  if (atomic_exchange(&refuse_calloc, 0) ||
      (n == 1024 && size == sizeof(void *) && atomic_load(&refuse_set_growth))) {
    atomic_fetch_add(&calloc_refused, 1);
    errno = ENOMEM;
    return NULL;
  }
  return __libc_calloc(n, size);
}

void *mmap(void *addr, size_t n, int prot, int flags, int fd, off_t off) {
  void *p = (void *)syscall(SYS_mmap, addr, n, prot, flags, fd, off);
  if (p != MAP_FAILED && n >= BIG && atomic_load(&armed)) {
    int i = atomic_load(&nmaps);
    if (i < MAX_MAPS) {
      maps[i] = p;
      map_len[i] = n;
      atomic_store(&nmaps, i + 1);
    }
    atomic_store(&refuse_calloc, 1);
  }
  return p;
}

int munmap(void *p, size_t n) {
  int k = -1;
  for (int i = 0; i < atomic_load(&nmaps); i++)
    if (maps[i] == p && map_len[i] == n && !atomic_load(&unmapped[i])) k = i;
  if (k >= 0 && atomic_load(&refuse_munmap)) {
    atomic_fetch_add(&munmap_refused, 1);
    errno = ENOMEM;
    return -1;
  }
  int rc = (int)syscall(SYS_munmap, p, n);
  if (rc == 0 && k >= 0) atomic_store(&unmapped[k], 1);
  return rc;
}

static bool is_mapped(void *p) {
  unsigned char v;
  return mincore(p, 1, &v) == 0 || errno != ENOMEM;
}

static void reset(void) {
  atomic_store(&nmaps, 0);
  for (int i = 0; i < MAX_MAPS; i++) atomic_store(&unmapped[i], 0);
  atomic_store(&calloc_refused, 0);
  atomic_store(&munmap_refused, 0);
}

/* hl_alloc of a 1 MiB object with each mapping's adoption refused */
static void alloc_refused(hl_heap *h) {
  reset();
  hl_ref r = 7;
  atomic_store(&armed, 1);
  /* what was refused: the large set's growth, not the block's bytes */
  FAILS(h, HL_ENOMEM, "the heap's set of large blocks could not grow", hl_alloc(h, BIG, 0, &r));
  atomic_store(&armed, 0);
  atomic_store(&refuse_calloc, 0);
  CHECK(r == 0, "a failed hl_alloc left its handle %" PRIu64, r);
  CHECK(atomic_load(&nmaps) == 2 && atomic_load(&calloc_refused) == 2,
        "%d mappings made, %d callocs refused: expected 2 of each (a try, a major cycle, a try)",
        atomic_load(&nmaps), atomic_load(&calloc_refused));
  hl_stats s = stats_of(h);
  CHECK(s.large_live_bytes == 0 && s.large_objects == 0,
        "nothing adopted, yet %" PRIu64 " large bytes in %" PRIu64 " objects are live",
        s.large_live_bytes, s.large_objects);
}

/* the same object, nothing refused: the large set grows, the object lives */
static void alloc_after(hl_heap *h) {
  hl_ref r = 0;
  OK(h, hl_alloc(h, BIG, 0, &r));
  hl_stats s = stats_of(h);
  CHECK(s.large_objects == 1, "%" PRIu64 " large objects after one allocation", s.large_objects);
  check_invariants(h);
  OK(h, hl_ref_release(h, r));
}

int main(void) {
  /* 1: munmap agrees -- each fresh mapping is unmapped at once */
  hl_heap *h = HEAP("mode=collected", "large_map_bytes=131072");
  alloc_refused(h);
  for (int i = 0; i < 2; i++)
    CHECK(atomic_load(&unmapped[i]), "mapping %d (%zu bytes at %p), not adopted, was never unmapped",
          i, map_len[i], maps[i]);
  pending_events e = large_unmap_pending_events(h);
  CHECK(e.refused == 0 && e.pending == -1, "nothing refused, yet event large_unmap_pending: "
        "refused %" PRId64 ", pending %" PRId64, e.refused, e.pending);
  CHECK(!is_mapped(maps[1]), "the last mapping at %p is still mapped", maps[1]);
  check_invariants(h);
  alloc_after(h);
  hl_heap_free(h);

  /* 2: munmap refuses -- the ranges are pending, then hl_trim unmaps them */
  h = HEAP("mode=collected", "large_map_bytes=131072");
  atomic_store(&refuse_munmap, 1);
  alloc_refused(h);
  CHECK(atomic_load(&munmap_refused) >= 2, "munmap refused %d times, expected 2 or more",
        atomic_load(&munmap_refused));
  e = large_unmap_pending_events(h);
  CHECK(e.refused == 2 && e.pending == 2 && e.err == ENOMEM,
        "two mappings refused, yet event large_unmap_pending: refused %" PRId64 ", pending %"
        PRId64 ", errno %" PRId64, e.refused, e.pending, e.err);
  CHECK(is_mapped(maps[0]) && is_mapped(maps[1]), "a pending range is not mapped");
  check_invariants(h); /* pending ranges are tracked: the check passes */
  atomic_store(&refuse_munmap, 0);
  OK(h, hl_trim(h));
  e = large_unmap_pending_events(h);
  CHECK(e.unmapped == 2 && e.pending == 0,
        "hl_trim with munmap agreeing: event large_unmap_pending unmapped %" PRId64 ", pending %"
        PRId64 ", expected 2 and 0", e.unmapped, e.pending);
  for (int i = 0; i < 2; i++)
    CHECK(atomic_load(&unmapped[i]), "pending range %d at %p never unmapped", i, maps[i]);
  CHECK(!is_mapped(maps[0]) && !is_mapped(maps[1]), "a range hl_trim unmapped is mapped");
  check_invariants(h);
  alloc_after(h);
  hl_heap_free(h);
  /* 3: a manual heap's large block (the system malloc's) the set cannot take:
   * freed, the same message */
  h = HEAP("mode=manual");
  atomic_store(&refuse_set_growth, 1);
  atomic_store(&calloc_refused, 0);
  void *p = hl_malloc(h, BIG);
  atomic_store(&refuse_set_growth, 0);
  CHECK(!p && atomic_load(&calloc_refused) == 1, "a manual heap's malloc took a block its large "
        "set could not (%p, %d callocs refused)", p, atomic_load(&calloc_refused));
  CHECK(strstr(hl_heap_error(h), "the heap's set of large blocks could not grow"),
        "the message of the refused malloc is '%s'", hl_heap_error(h));
  hl_stats ms = stats_of(h);
  CHECK(ms.large_live_bytes == 0 && ms.large_objects == 0, "%" PRIu64 " large bytes live",
        ms.large_live_bytes);
  p = hl_malloc(h, BIG);
  CHECK(p, "malloc after the refusal: %s", hl_heap_error(h));
  hl_free(h, p);
  check_invariants(h);
  hl_heap_free(h);
  /* 4: a collected heap's large block from the system malloc
   * (large_map_bytes=0) the set cannot take: freed, not leaked (large.c
   * hl__large_alloc's free of it: no test reached it, make coverage at
   * ee5b4a1) -- the system malloc's bytes in use as before */
  h = HEAP("mode=collected", "large_map_bytes=0");
  struct mallinfo2 m0 = mallinfo2();
  atomic_store(&refuse_set_growth, 1);
  atomic_store(&calloc_refused, 0);
  hl_ref r = 7;
  FAILS(h, HL_ENOMEM, "the heap's set of large blocks could not grow", hl_alloc(h, BIG, 0, &r));
  atomic_store(&refuse_set_growth, 0);
  struct mallinfo2 m1 = mallinfo2();
  size_t used0 = m0.uordblks + m0.hblkhd, used1 = m1.uordblks + m1.hblkhd;
  CHECK(r == 0 && atomic_load(&calloc_refused) >= 1, "handle %" PRIu64 ", %d callocs refused", r,
        atomic_load(&calloc_refused));
  CHECK(used1 < used0 + BIG / 2, "the system malloc holds %zu bytes more after the refused "
        "allocation of %d: its block was not freed", used1 - used0, BIG);
  check_invariants(h);
  alloc_after(h);
  hl_heap_free(h);
  printf("unadopted mappings: unmapped at once, or pending until hl_trim\n");
  return 0;
}
#endif
