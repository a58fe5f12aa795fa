/* preload_side_table.c -- libheaplab-malloc.so's allocation bits cost one
 * bit per block, not one per 16 bytes of every page.
 *
 * The side table gave every 64 KiB page 512 bytes of allocation bits (one
 * per 16-byte granule, for the smallest class), 0.8% of the heap whatever
 * the blocks' size: 508 KiB at bench-preload server's peak.  A page now
 * takes ceil(slots / 64) words -- one word for 1 KiB blocks.  Here 96 MiB
 * of 1,024-byte blocks are written; the resident set may grow by at most
 * 0.5% more than their bytes (measured: 0.83% before, 0.06% after, the
 * page descriptors included). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rss.h"

int main(void) {
  enum { SZ = 1024, N = 96 * 1024 };
  void **b = malloc(N * sizeof *b); /* (written before the count) */
  if (!b) return 1;
  memset(b, 1, N * sizeof *b); /* (not 0: malloc + memset 0 may become calloc) */
  void *warm = malloc(SZ);          /* the thread cache is set up */
  memset(warm, 1, SZ);
  rss_kib(); /* (the first read faults stdio's code in) */
  long before = rss_kib();
  for (int i = 0; i < N; i++) {
    b[i] = malloc(SZ);
    if (!b[i]) {
      printf("FAIL: malloc(%d) = NULL\n", SZ);
      return 1;
    }
    memset(b[i], 2, SZ);
  }
  long after = rss_kib();
  double data = (double)N * SZ / 1024, ratio = (double)(after - before) / data;
  printf("%d blocks of %d bytes: resident +%ld KiB for %.0f KiB of blocks (%.4f)\n", N, SZ,
         after - before, data, ratio);
  for (int i = 0; i < N; i++) free(b[i]);
  free(b);
  free(warm);
  if (ratio > 1.005) {
    printf("FAIL: the side table costs %.2f%% of the blocks' bytes\n", (ratio - 1) * 100);
    return 1;
  }
  return 0;
}
