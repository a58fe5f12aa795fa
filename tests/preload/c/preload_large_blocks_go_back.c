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
 *
 * The trims' scratch came from glibc's heap too (__libc_realloc, grown in a
 * trim), and each trim's outcome array (malloc'd and freed: parked in
 * glibc's tcache, a chunk in use for glibc): when the program freed small
 * blocks while its large blocks filled glibc's heap, the trims that gave
 * the small pages back put them above the large blocks, which stayed
 * resident once freed (80 MB of 4,000 blocks of 20,000 bytes).  Now the
 * scratch is a mapping of its own and holds the outcomes (release.c,
 * scratch_room).
 *
 * The program: 4,200 blocks of 17,000 bytes (the set's last growth, at
 * 4,096 blocks, comes near the end), each written whole, then all freed.
 * With --small-first, 120,000 small blocks of 250 bytes too, half made
 * before the large ones and half after, freed before them.  Checks: when
 * the large blocks are freed the resident set drops by at least 90% of what
 * they added (before the fixes: 0%).  The same program runs on glibc alone
 * as the control (there every block is in glibc's heap, and all of it goes
 * back).  Exit 0 = passed.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rss.h"

enum { BLOCKS = 4200, BYTES = 17000, SMALL = 120000, SMALL_BYTES = 250 };

static void *(*volatile MALLOC)(size_t) = malloc;
static void (*volatile FREE)(void *) = free;

static void *small[SMALL];

static int make_small(int from, int to) {
  for (int i = from; i < to; i++) {
    small[i] = MALLOC(SMALL_BYTES);
    if (!small[i]) {
      fprintf(stderr, "FAIL: malloc(%d) returned NULL at small block %d\n", SMALL_BYTES, i);
      return 1;
    }
    memset(small[i], i & 0xff, SMALL_BYTES);
  }
  return 0;
}

int main(int argc, char **argv) {
  static void *b[BLOCKS];
  bool small_first = argc > 1 && strcmp(argv[1], "--small-first") == 0;
  if (argc > 1 && !small_first) {
    fprintf(stderr, "usage: %s [--small-first]\n", argv[0]);
    return 2;
  }
  if (small_first && make_small(0, SMALL / 2)) return 1;
  long before = rss_kib();
  for (int i = 0; i < BLOCKS; i++) {
    b[i] = MALLOC(BYTES);
    if (!b[i]) {
      fprintf(stderr, "FAIL: malloc(%d) returned NULL at block %d\n", BYTES, i);
      return 1;
    }
    memset(b[i], i & 0xff, BYTES);
  }
  long loaded = rss_kib(), added = loaded - before;
  if (small_first) {
    if (make_small(SMALL / 2, SMALL)) return 1;
    for (int i = 0; i < SMALL; i++) FREE(small[i]);
    loaded = rss_kib();
  }
  for (int i = 0; i < BLOCKS; i++) FREE(b[i]);
  long freed = rss_kib(), back = loaded - freed;
  printf("%s%d blocks of %d bytes: VmRSS %ld -> +%ld KiB; %ld -> %ld KiB when freed (%ld of "
         "%ld KiB back)\n", small_first ? "small blocks freed first, " : "", BLOCKS, BYTES,
         before, added, loaded, freed, back, added);
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
