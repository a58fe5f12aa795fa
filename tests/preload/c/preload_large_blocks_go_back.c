/*
 * preload_large_blocks_go_back.c -- large blocks freed all at once go back
 * to the system, as on glibc alone.
 *
 * Blocks above small_max (16 KiB) are glibc's (__libc_malloc), in its heap
 * below the mmap threshold (1 MiB), and glibc gives back only the free
 * memory above the last chunk in use there.  The library's set of large
 * blocks came from the same heap (__libc_calloc): each time it grew, its new
 * table was carved at the heap's top, above the blocks made so far, and it
 * stayed there after the program freed them all -- redis-server's FLUSHALL
 * of 17,647 values of 17,000 bytes gave 7% of the memory back (jemalloc 99%;
 * the real-programs hunt, session 45).  Now the table is a mapping of its
 * own (util/ptrset.c, table_new).
 *
 * The program: 4,200 blocks of 17,000 bytes (the set's last growth, at
 * 4,096 blocks, comes near the end), each written whole, then all freed.
 * Checks: the resident set drops by at least 90% of what the blocks added
 * (before the fix: 2-3%).  The same program runs on glibc alone as the
 * control.  Exit 0 = passed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rss.h"

enum { BLOCKS = 4200, BYTES = 17000 };

static void *(*volatile MALLOC)(size_t) = malloc;
static void (*volatile FREE)(void *) = free;

int main(void) {
  static void *b[BLOCKS];
  long before = rss_kib();
  for (int i = 0; i < BLOCKS; i++) {
    b[i] = MALLOC(BYTES);
    if (!b[i]) {
      fprintf(stderr, "FAIL: malloc(%d) returned NULL at block %d\n", BYTES, i);
      return 1;
    }
    memset(b[i], i & 0xff, BYTES);
  }
  long loaded = rss_kib();
  for (int i = 0; i < BLOCKS; i++) FREE(b[i]);
  long freed = rss_kib();
  long added = loaded - before, back = loaded - freed;
  printf("%d blocks of %d bytes: VmRSS %ld -> %ld -> %ld KiB (%ld of %ld KiB back)\n", BLOCKS,
         BYTES, before, loaded, freed, back, added);
  if (before < 0 || added < BLOCKS * (BYTES / 1024) * 9 / 10) {
    fprintf(stderr, "FAIL: the blocks did not show in VmRSS (%ld KiB added)\n", added);
    return 1;
  }
  if (back * 10 < added * 9) {
    fprintf(stderr, "FAIL: %ld of the %ld KiB the blocks added went back when they were freed "
            "(at least 90%% expected)\n", back, added);
    return 1;
  }
  return 0;
}
