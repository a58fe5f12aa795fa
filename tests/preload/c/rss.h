/* rss.h -- the preload tests' one reading of the process's resident set:
 * VmRSS from /proc/self/status, KiB (-1 when it cannot be read).  Header-
 * only: each preload test is a program of its own, linked to nothing of
 * heaplab's (it runs under LD_PRELOAD). */
#ifndef PRELOAD_RSS_H
#define PRELOAD_RSS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline long rss_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kib = atol(line + 6);
  if (f) fclose(f);
  return kib;
}

#endif
