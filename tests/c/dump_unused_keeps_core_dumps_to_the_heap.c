/* dump_unused=0: a core dump (or gdb's gcore) holds the heap's pages, not its
 * reservation.  The kernel dumps each anonymous mapping the process wrote to
 * whole -- untouched pages as zeros down a pipe and in gcore: the gcore of a
 * program with 1 MiB malloc'ed on libheaplab-malloc.so was a 34.9 GB file.
 * Read from /proc/self/smaps as the dumper reads the mappings (written to:
 * Anonymous > 0; kept: no "dd" in VmFlags), for a collected and a manual
 * heap of 32 GiB, each filled with 48 MiB:
 *   - dump_unused=0: a dump would hold under 256 MiB,
 *     every object sampled lies in a dumped mapping, the reservation is two
 *     VMAs;
 *   - dump_unused=1 (the default, the control): the whole reservation would
 *     be dumped, one VMA;
 *   - at vm.max_map_count (the process's maps used up by one-page mappings)
 *     the first MADV_DODUMP, a split, is refused; once the maps are freed
 *     and the heap grows, its first block is dumped and the reservation is
 *     two VMAs (the refused call was recorded as done: the first MiB stayed
 *     out of dumps for good, three VMAs -- the session's review).  Skipped
 *     under the sanitizers (their own mappings) and past 1,100,000 maps. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <string.h>

#include "check.h"

/* Bytes a core dump of the process would hold, and whether each of n
 * addresses lies in a dumped mapping (1), an excluded one (-1) or none. */
static uint64_t dumped_bytes(const uintptr_t *at, int n, int *in) {
  FILE *f = fopen("/proc/self/smaps", "r");
  CHECK(f != NULL, "open /proc/self/smaps");
  char line[1024];
  unsigned long long a = 0, b = 0, anon = 0;
  uint64_t total = 0;
  for (int k = 0; k < n; k++) in[k] = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long x, y;
    char *sp = strchr(line, ' ');
    if (sp && strchr(line, '-') < sp && sscanf(line, "%llx-%llx ", &x, &y) == 2) {
      a = x, b = y, anon = 0;
    } else if (!strncmp(line, "Anonymous:", 10)) {
      anon = strtoull(line + 10, NULL, 10);
    } else if (!strncmp(line, "VmFlags:", 8)) {
      int kept = strstr(line, " dd") == NULL;
      if (kept && anon > 0) total += b - a;
      for (int k = 0; k < n; k++)
        if (at[k] >= a && at[k] < b) in[k] = kept ? 1 : -1;
    }
  }
  fclose(f);
  return total;
}

static void scenario(const char *mode, int unused) {
  char opt[32];
  snprintf(opt, sizeof opt, "dump_unused=%d", unused);
  hl_heap *h = HEAP(mode, opt, "reserve_bytes=32g");
  enum { N = 12 };
  uintptr_t at[N];
  int in[N];
  if (!strcmp(mode, "mode=manual")) {
    for (int k = 0; k < N; k++) {
      /* 4 MiB of blocks per sample: the heap grows past its dumped part */
      void *p = NULL;
      for (int i = 0; i < (4 << 20) / 64; i++) {
        p = hl_malloc(h, 64);
        CHECK(p != NULL, "hl_malloc: %s", hl_heap_error(h));
        memset(p, 1, 64);
      }
      at[k] = (uintptr_t)p;
    }
  } else {
    hl_ref r;
    OK(h, hl_fill(h, 48u << 20, 256, 0, &r));
    hl_object_info info;
    OK(h, hl_ref_info(h, r, &info));
    for (int k = 0; k < N; k++) {
      hl_ref o;
      OK(h, hl_ref_get(h, r, (info.refs - 1) * (uint64_t)k / (N - 1), &o));
      hl_object_info oi;
      OK(h, hl_ref_info(h, o, &oi));
      at[k] = (uintptr_t)oi.address;
    }
  }
  uint64_t d = dumped_bytes(at, N, in), v = vmas_of(h);
  printf("%s dump_unused=%d: a dump would hold %" PRIu64 " MiB; the reservation is %" PRIu64
         " VMAs\n", mode, unused, d >> 20, v);
  if (unused) {
    CHECK(d >= ((uint64_t)32 << 30), "dump_unused=1: only %" PRIu64 " bytes dumped", d);
    CHECK(v == 1, "dump_unused=1: %" PRIu64 " VMAs", v);
  } else {
    /* (48 MiB of objects: the heap's part at most twice that, the tables'
     * and the process's own; the mark stacks, scratch, never: with them a
     * collected heap's dump was 565 MiB) */
    CHECK(d < ((uint64_t)256 << 20), "dump_unused=0: %" PRIu64 " bytes would be dumped", d);
    CHECK(v == 2, "dump_unused=0: %" PRIu64 " VMAs", v);
  }
  for (int k = 0; k < N; k++)
    CHECK(in[k] == 1, "%s %s: object %d (%#lx) %s", mode, opt, k, (unsigned long)at[k],
          in[k] ? "in a mapping left out of core dumps" : "in no mapping");
  check_invariants(h);
  hl_heap_free(h);
}

static void at_the_map_limit(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  puts("map limit: skipped under the sanitizers");
  return;
#endif
  FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
  long limit = 0;
  CHECK(f && fscanf(f, "%ld", &limit) == 1, "read vm.max_map_count");
  fclose(f);
  if (limit > 1100000) {
    printf("map limit: vm.max_map_count is %ld: skipped\n", limit);
    return;
  }
  hl_heap *h = HEAP("mode=manual", "dump_unused=0", "reserve_bytes=1g");
  /* one-page mappings, protections alternating (no two merge), until the
   * kernel refuses */
  size_t n = 0, cap = (size_t)limit + 16;
  void **m = malloc(cap * sizeof *m);
  CHECK(m != NULL, "malloc");
  long ps = sysconf(_SC_PAGESIZE);
  for (; n < cap; n++) {
    m[n] = mmap(NULL, (size_t)ps, n & 1 ? PROT_READ : PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m[n] == MAP_FAILED) break;
  }
  char *first = hl_malloc(h, 64);
  CHECK(first != NULL, "hl_malloc at the map limit: %s", hl_heap_error(h));
  /* a heap made here is refused, and the message names the limit (it named
   * RLIMIT_AS, too many heaps, or a smaller reserve_bytes: none of them the
   * cause; the release hunt, session 25).  (A reservation the kernel can
   * merge with a neighbour needs no new mapping: then it is made.) */
  const char *sizes[] = {"64m", "1g"};
  for (int i = 0; i < 2; i++) {
    hl_heap *other = NULL;
    char e[512];
    hl_options o;
    hl_options_defaults(&o);
    CHECK(hl_options_set(&o, "reserve_bytes", sizes[i], e, sizeof e) == HL_OK, "%s", e);
    int rc = hl_heap_new(&o, &other, e, sizeof e);
    if (rc == HL_OK) {
      printf("map limit: a heap of %s was made (merged with a neighbour)\n", sizes[i]);
      hl_heap_free(other);
      continue;
    }
    CHECK(strstr(e, "vm.max_map_count") != NULL, "a heap refused at the map limit: %s", e);
    printf("map limit: %s\n", e);
  }
  memset(first, 1, 64);
  uint64_t at_limit = vmas_of(h);
  for (size_t i = 0; i < n; i++) munmap(m[i], (size_t)ps);
  free(m);
  for (int i = 0; i < (8 << 20) / 64; i++) {
    char *p = hl_malloc(h, 64);
    CHECK(p != NULL, "hl_malloc: %s", hl_heap_error(h));
    memset(p, 1, 64);
  }
  uintptr_t at = (uintptr_t)first;
  int in;
  dumped_bytes(&at, 1, &in);
  uint64_t v = vmas_of(h);
  printf("map limit: %zu maps made; the reservation %" PRIu64 " VMAs there, %" PRIu64
         " after; the first block %s\n", n, at_limit, v,
         in == 1 ? "dumped" : "left out of core dumps");
  CHECK(in == 1, "the first block, made at the map limit, is left out of core dumps");
  CHECK(v == 2, "the reservation is %" PRIu64 " VMAs", v);
  hl_heap_free(h);
}

int main(void) {
  const char *modes[] = {"mode=collected", "mode=manual"};
  for (int m = 0; m < 2; m++) {
    scenario(modes[m], 0);
    scenario(modes[m], 1);
  }
  at_the_map_limit();
  return 0;
}
