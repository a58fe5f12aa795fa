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
 *     be dumped, one VMA. */
#include <stdlib.h>
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

int main(void) {
  const char *modes[] = {"mode=collected", "mode=manual"};
  for (int m = 0; m < 2; m++) {
    scenario(modes[m], 0);
    scenario(modes[m], 1);
  }
  return 0;
}
