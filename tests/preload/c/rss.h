/* rss.h -- the preload tests' one reading of the process's resident set
 * (VmRSS) and locked memory (VmLck) from /proc/self/status.  Header-
 * only: each preload test is a program of its own, linked to nothing of
 * heaplab's (it runs under LD_PRELOAD). */
#ifndef PRELOAD_RSS_H
#define PRELOAD_RSS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A "Key:   N kB" line of /proc/self/status, KiB (VmRSS, VmLck...); -1
 * when it cannot be read. */
static inline long status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  size_t n = strlen(key);
  long kib = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, n) == 0 && line[n] == ':') kib = atol(line + n + 1);
  if (f) fclose(f);
  return kib;
}

static inline long rss_kib(void) { return status_kib("VmRSS"); }

#endif
