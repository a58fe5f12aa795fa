/*
 * preload_core_dump.c -- what a core dump of a program on libheaplab-malloc.so
 * holds.  The kernel dumps every anonymous mapping the process wrote to,
 * whole (untouched pages as zeros down a pipe -- systemd-coredump, apport --
 * and in gdb's gcore): the gcore of a preloaded program that had malloc'ed
 * 1 MiB was a 34.9 GB file, all of it on disk, the heap's 32 GiB reservation
 * and its side tables.  Read from /proc/self/smaps as the kernel's dumper
 * reads the mappings (written to: Anonymous > 0; not advised MADV_DONTDUMP:
 * no "dd" in VmFlags):
 *   - what would be dumped stays under 512 MiB with 96 MiB of blocks made in
 *     steps (the heap's dumped part grows as it does);
 *   - every block made -- the first, the last, one in the middle of each
 *     step -- lies in a mapping that is dumped.
 * Runs on the default (32 GiB) reservation, and on glibc alone (the
 * control).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *(*volatile M)(size_t) = malloc;

enum { STEPS = 6, MAX_CHECKED = 3 * STEPS };
static uintptr_t checked[MAX_CHECKED];
static int nchecked;

static void fail(const char *what, unsigned long long a, unsigned long long b) {
  fprintf(stderr, "FAIL: %s (%llu, %llu)\n", what, a, b);
  exit(1);
}

int main(void) {
  /* 1, 2, 4 ... 32 MiB of 48-byte blocks: the heap grows past its dumped
   * part five times */
  size_t bytes = 1 << 20;
  for (int s = 0; s < STEPS; s++, bytes *= 2) {
    size_t n = bytes / 48;
    for (size_t i = 0; i < n; i++) {
      char *p = M(48);
      if (!p) fail("malloc(48) returned NULL", s, i);
      memcpy(p, "HEAPLAB-CORE-DUMP-BLOCK", 24);
      if (i == 0 || i == n / 2 || i == n - 1) checked[nchecked++] = (uintptr_t)p;
    }
  }
  FILE *f = fopen("/proc/self/smaps", "r");
  if (!f) fail("cannot open /proc/self/smaps", 0, 0);
  char line[1024];
  unsigned long long lo = 0, hi = 0, anon = 0, dumped = 0;
  int found[MAX_CHECKED] = {0};
  while (fgets(line, sizeof line, f)) {
    unsigned long long a, b;
    if (sscanf(line, "%llx-%llx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      lo = a, hi = b, anon = 0;
    } else if (!strncmp(line, "Anonymous:", 10)) {
      anon = strtoull(line + 10, NULL, 10);
    } else if (!strncmp(line, "VmFlags:", 8)) {
      int dd = strstr(line, " dd") != NULL;
      if (!dd && anon > 0) dumped += hi - lo;
      for (int k = 0; k < nchecked; k++)
        if (checked[k] >= lo && checked[k] < hi) found[k] = dd ? -1 : 1;
    }
  }
  fclose(f);
  if (dumped > (512ull << 20)) fail("a core dump would hold more than 512 MiB (bytes)", dumped, 0);
  for (int k = 0; k < nchecked; k++)
    if (found[k] != 1)
      fail(found[k] ? "a block lies in a mapping left out of core dumps (block k)"
                    : "a block lies in no mapping (block k)",
           (unsigned long long)k, checked[k]);
  printf("ok: %llu MiB would be dumped, every block in it\n", dumped >> 20);
  return 0;
}
