/* Large objects a collected heap frees at vm.max_map_count give their pages
 * back, the ranges munmap refuses are retried until they are unmapped, and
 * hl_heap_free leaves none of them mapped.
 *
 * Why: each large object of large_map_bytes (128 KiB) or more is a mapping
 * of its own, and mappings made one after another merge into one VMA.
 * Unmapping one in the middle splits that VMA, which at the map limit the
 * kernel refuses (munmap: ENOMEM) -- and release_block() ignored the
 * result: the bytes stayed mapped and resident while large_live_bytes said
 * them freed (375 MB resident where 198 MB was right), nothing (stat, event,
 * hl_heap_check) said so, and hl_heap_free lost them for good (the scale
 * hunt, session 28).  Before the fix this test failed at its first check:
 * the process's resident set dropped by 0.4 MiB of the 38.3 MiB freed.
 *
 * The process spends its own map budget (the sysctl is read, never
 * written), as mark_at_the_map_limit_maps_nothing does: a filler mapping
 * whose pages alternate between protections, one VMA a page.  N objects of
 * 200,000 bytes, written whole (resident), then the filler to exactly the
 * limit, then every other object dropped and a collection:
 *   - the resident set drops by nearly the dead objects' bytes (the lowest
 *     of three readings of statm; each refused range keeps its first page,
 *     its record), and mincore finds at most that page of each dead range;
 *   - the event large_unmap_pending says how many munmap refused, and the
 *     heap counts them pending; hl_heap_check passes (they are tracked),
 *     and fails when the pending list and its count disagree;
 *   - another collection at the limit changes nothing and breaks nothing;
 *   - with the filler gone, the next cycle unmaps every pending range
 *     (mincore says ENOMEM of each of its pages) and the event says so;
 *   - the live objects kept their bytes, and hl_heap_free unmaps every range.
 * A second heap, a quarter of its objects dropped at the limit: with the
 * filler gone, hl_trim unmaps every pending range; then, at the limit
 * again, another quarter dropped (each inside a VMA of three objects), it
 * is freed while ranges are pending and unmaps them all (a whole VMA
 * unmapped gives back map budget for the splits).  0.5 s.  Under ASan too (make test-asan): after the filler the
 * test itself calls no malloc -- ASan's allocator maps a region the first
 * time a size class is used, which fails at the limit (check.h's
 * mincore_resident did: "malloc" failed, then LeakSanitizer could not map
 * its guard at exit) -- and what the library does at the limit maps
 * nothing of ASan's. */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>

#include "check.h"
#include "map_limit.h"
#include "internal.h"

enum { N = 400, SIZE = 200000 };

static long page_size;

static long read_long(const char *path, int field) {
  char buf[128] = {0};
  int fd = open(path, O_RDONLY);
  CHECK(fd >= 0, "open %s: %s", path, strerror(errno));
  CHECK(read(fd, buf, sizeof buf - 1) > 0, "read %s", path);
  close(fd);
  char *p = buf;
  for (int i = 0; i < field; i++) {
    p = strchr(p, ' ');
    CHECK(p, "%s: no field %d", path, field);
    p++;
  }
  return strtol(p, NULL, 10);
}

/* The process's resident bytes now: the lowest of three readings. */
static uint64_t rss(void) {
  long lo = -1;
  for (int i = 0; i < 3; i++) {
    long r = read_long("/proc/self/statm", 1);
    if (lo < 0 || r < lo) lo = r;
  }
  return (uint64_t)lo * (uint64_t)page_size;
}

/* The process at exactly the limit: each refused munmap is this heap's. */
static filler fill_exactly(long limit) {
  filler f = fill_to_limit(limit);
  CHECK(map_count() == limit, "the filler reached %ld maps, limit %ld", map_count(), limit);
  return f;
}

typedef struct range {
  uintptr_t lo, hi; /* the object's mapping: its record, then the block */
} range;

static uint64_t pages_of(range r) {
  return (r.hi - r.lo + (uintptr_t)page_size - 1) / (uintptr_t)page_size;
}

/* OS pages of r still mapped (mincore of each: ENOMEM for an unmapped one). */
static uint64_t mapped_pages(range r) {
  uint64_t n = 0;
  unsigned char v;
  for (uintptr_t p = r.lo; p < r.hi; p += (uintptr_t)page_size) {
    if (mincore((void *)p, 1, &v) == 0) n++;
    else CHECK(errno == ENOMEM, "mincore %p: %s", (void *)p, strerror(errno));
  }
  return n;
}

/* Resident bytes of r (mincore; no malloc, which could map at the limit). */
static uint64_t resident(range r) {
  static unsigned char vec[1024];
  uint64_t n = pages_of(r), bytes = 0;
  CHECK(n <= sizeof vec, "a range of %" PRIu64 " pages", n);
  CHECK(mincore((void *)r.lo, n * (uint64_t)page_size, vec) == 0, "mincore: %s", strerror(errno));
  for (uint64_t i = 0; i < n; i++) bytes += (vec[i] & 1) ? (uint64_t)page_size : 0;
  return bytes;
}

/* N objects of SIZE bytes, written whole: their handles and ranges. */
static hl_heap *make(hl_ref *refs, range *ranges) {
  /* no cycle but the test's own */
  hl_heap *h = HEAP("large_trigger_bytes=1099511627776", "gc_trigger_bytes=1073741824");
  for (int i = 0; i < N; i++) {
    OK(h, hl_alloc(h, SIZE, 0, &refs[i]));
    hl_object_info in;
    OK(h, hl_ref_info(h, refs[i], &in));
    CHECK(in.large, "object %d is not large", i);
    hl_enter(h);
    memset(hl_obj_payload((void *)(uintptr_t)in.object), 0x40 + i % 64, SIZE);
    hl_leave(h);
    uintptr_t lo = (uintptr_t)in.object - sizeof(hl_large);
    CHECK(lo % (uintptr_t)page_size == 0, "object %d is not a mapping of its own", i);
    ranges[i] = (range){lo, lo + sizeof(hl_large) + HL_OBJ_HEADER_BYTES + SIZE};
  }
  return h;
}

/* Objects from, from + step, ... dropped and collected. */
static void drop(hl_heap *h, hl_ref *refs, int from, int step) {
  for (int i = from; i < N; i += step) OK(h, hl_ref_release(h, refs[i]));
  OK(h, hl_collect(h, 1, 1));
}

/* Every page of the ranges from, from + step, ... unmapped, nothing
 * pending, and the events read since say the ranges were unmapped. */
static void all_unmapped(hl_heap *h, const range *ranges, int from, int step, const char *when) {
  pending_events ev = large_unmap_pending_events(h);
  uint64_t still = 0;
  for (int i = from; i < N; i += step) still += mapped_pages(ranges[i]);
  CHECK(still == 0 && h->unmap_pending_n == 0 && h->unmap_pending_bytes == 0,
        "after %s: %" PRIu64 " pages of dead ranges mapped, %" PRIu64 " pending", when, still,
        h->unmap_pending_n);
  CHECK(ev.pending == 0 && ev.unmapped > 0, "the event of %s: %" PRId64 " unmapped, %" PRId64
        " pending", when, ev.unmapped, ev.pending);
  OK(h, hl_heap_check(h));
}

int main(void) {
  page_size = sysconf(_SC_PAGESIZE);
  long limit = max_map_count();
  if (limit > 1100000) {
    printf("vm.max_map_count is %ld: too many maps to fill quickly; skipped\n", limit);
    return 77;
  }
  static hl_ref refs[N];
  static range ranges[N];
  uint64_t dead_pages = 0, dead_n = N / 2;
  hl_heap *h = make(refs, ranges);
  for (int i = 0; i < N; i += 2) dead_pages += pages_of(ranges[i]);
  uint64_t dead_bytes = dead_pages * (uint64_t)page_size;
  filler f = fill_exactly(limit);
  uint64_t before = rss();
  drop(h, refs, 0, 2);
  uint64_t after = rss();
  uint64_t still = 0; /* dead ranges' pages still mapped */
  for (int i = 0; i < N; i += 2) still += mapped_pages(ranges[i]);
  uint64_t dead_resident = 0;
  for (int i = 0; i < N; i += 2)
    if (mapped_pages(ranges[i]) == pages_of(ranges[i]))
      dead_resident += resident(ranges[i]);
  pending_events ev = large_unmap_pending_events(h);
  printf("at %ld maps: %" PRIu64 " objects dropped (%.1f MiB): resident %.1f -> %.1f MiB, "
         "%" PRIu64 " of their pages still mapped, %.1f MiB of them resident; munmap refused "
         "%" PRId64 " (%s), pending %" PRIu64 "\n",
         limit, dead_n, dead_bytes / MiB, before / MiB, after / MiB, still,
         dead_resident / MiB, ev.refused, ev.err ? strerror((int)ev.err) : "-",
         h->unmap_pending_n);
  CHECK(before > after && before - after >= dead_bytes / 10 * 9,
        "the resident set dropped by %.1f MiB of the %.1f MiB freed at the map limit",
        before > after ? (before - after) / MiB : 0.0, dead_bytes / MiB);
  CHECK(dead_resident <= dead_n * (uint64_t)page_size,
        "%.1f MiB of the dead objects' ranges resident (their records' pages: %.1f MiB)",
        dead_resident / MiB, dead_n * (uint64_t)page_size / MiB);
  CHECK(ev.refused > 0, "no munmap was refused at the map limit: the test did not reach it");
  CHECK(ev.err == ENOMEM, "munmap refused with errno %" PRId64 ", not ENOMEM", ev.err);
  CHECK(ev.pending == ev.refused && h->unmap_pending_n == (uint64_t)ev.refused,
        "the events say %" PRId64 " refused, %" PRId64 " pending; the heap counts %" PRIu64,
        ev.refused, ev.pending, h->unmap_pending_n);
  CHECK(still >= (uint64_t)ev.refused, "%" PRIu64 " pages of %" PRId64 " refused ranges mapped",
        still, ev.refused);
  CHECK(stats_of(h).large_live_bytes == (uint64_t)(N / 2) * (HL_OBJ_HEADER_BYTES + SIZE),
        "large_live_bytes %" PRIu64, stats_of(h).large_live_bytes);
  OK(h, hl_heap_check(h));
  /* the check reads the pending list: a range it does not count fails it */
  h->unmap_pending_n--;
  FAILS(h, HL_ECHECK, "unmap pending list", hl_heap_check(h));
  h->unmap_pending_n++;

  /* another cycle at the limit: retried (the first range), refused again */
  OK(h, hl_collect(h, 1, 1));
  CHECK(h->unmap_pending_n == (uint64_t)ev.refused, "pending %" PRIu64 " after a cycle at the "
        "limit, %" PRId64 " before", h->unmap_pending_n, ev.refused);
  OK(h, hl_heap_check(h));
  CHECK(map_count() <= limit + 1, "maps %ld at a limit of %ld", map_count(), limit);

  /* the filler gone: the next cycle unmaps every pending range */
  CHECK(munmap(f.base, f.bytes) == 0, "filler munmap: %s", strerror(errno));
  OK(h, hl_collect(h, 1, 1));
  all_unmapped(h, ranges, 0, 2, "the cycle after the limit");
  /* the live objects kept their bytes */
  hl_enter(h);
  for (int i = 1; i < N; i += 2) {
    const uint8_t *p = hl_obj_payload((void *)(ranges[i].lo + sizeof(hl_large)));
    for (size_t k = 0; k < SIZE; k += 4096)
      CHECK(p[k] == 0x40 + i % 64, "object %d byte %zu is %d", i, k, p[k]);
  }
  hl_leave(h);
  hl_heap_free(h);
  for (int i = 0; i < N; i++)
    CHECK(mapped_pages(ranges[i]) == 0, "object %d's range still mapped after hl_heap_free", i);

  /* a second heap: hl_trim unmaps them too; then it is freed at the limit
   * with ranges pending, and unmaps them all */
  h = make(refs, ranges);
  f = fill_exactly(limit);
  drop(h, refs, 0, 4);
  CHECK(h->unmap_pending_n > 0, "no range pending at the limit");
  CHECK(munmap(f.base, f.bytes) == 0, "filler munmap: %s", strerror(errno));
  OK(h, hl_trim(h));
  all_unmapped(h, ranges, 0, 4, "the trim after the limit");
  /* (objects 1, 2, 3 of each four are one VMA now: 2 is inside it) */
  f = fill_exactly(limit);
  drop(h, refs, 2, 4);
  uint64_t pending = h->unmap_pending_n;
  CHECK(pending > 0, "no range pending at the limit");
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  uint64_t left = 0;
  for (int i = 0; i < N; i++) left += mapped_pages(ranges[i]) > 0;
  munmap(f.base, f.bytes);
  printf("a heap freed at the limit with %" PRIu64 " ranges pending left %" PRIu64
         " of its %d ranges mapped\n", pending, left, N);
  CHECK(left == 0, "%" PRIu64 " ranges still mapped after hl_heap_free at the limit", left);
  return 0;
}
