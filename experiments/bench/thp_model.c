/*
 * thp_model.c -- a stand-alone model of the huge-page fill and of the prefault helper
 * (docs/performance.md, fourth round, item 21): no heaplab, only the kernel's part.
 * 216 MiB (108 chunks of 2 MiB) advised MADV_HUGEPAGE, written in 264-byte objects every
 * 272 bytes, chunk by chunk:
 *   thp_model 0                  each chunk faults at its first write
 *   thp_model 1                  each chunk MADV_POPULATE_WRITE first (thp=populate)
 *   thp_model 2 [CHUNKS [WINDOW]] as 1, and a helper thread populates the chunks below
 *                                cursor + WINDOW ahead of the writer (WINDOW 4: up to 3
 *                                ahead); the writer waits for a chunk the helper is at and
 *                                populates an unclaimed one itself (thp_prefault's protocol)
 * Build: cc -O2 -pthread experiments/bench/thp_model.c -o /tmp/thp_model
 * Prints the time of the writes (the helper included).  Not built by Meson.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define CHUNK ((size_t)2 << 20)

static uint8_t *base;
static int nchunks, window = 1 << 30;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int next_c, busy = -1, cursor, stop; /* under mu */

static uint64_t now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void *helper(void *arg) {
  (void)arg;
  pthread_mutex_lock(&mu);
  for (;;) {
    while (!stop && next_c < nchunks && next_c >= cursor + window) pthread_cond_wait(&cv, &mu);
    if (stop || next_c >= nchunks) break;
    int c = next_c++;
    busy = c;
    pthread_mutex_unlock(&mu);
    madvise(base + (size_t)c * CHUNK, CHUNK, MADV_POPULATE_WRITE);
    pthread_mutex_lock(&mu);
    busy = -1;
    pthread_cond_broadcast(&cv);
  }
  pthread_mutex_unlock(&mu);
  return NULL;
}

int main(int argc, char **argv) {
  int mode = argc > 1 ? atoi(argv[1]) : 1;
  nchunks = argc > 2 ? atoi(argv[2]) : 108;
  if (argc > 3) window = atoi(argv[3]);
  size_t len = (size_t)nchunks * CHUNK;
  uint8_t *m = mmap(NULL, len + CHUNK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (m == MAP_FAILED) return perror("mmap"), 1;
  base = (uint8_t *)(((uintptr_t)m + CHUNK - 1) & ~(uintptr_t)(CHUNK - 1));
  if (madvise(base, len, MADV_HUGEPAGE)) perror("MADV_HUGEPAGE");
  uint64_t t0 = now_ns();
  pthread_t th;
  if (mode == 2) pthread_create(&th, NULL, helper, NULL);
  for (int c = 0; c < nchunks; c++) {
    uint8_t *p = base + (size_t)c * CHUNK;
    if (mode == 1) madvise(p, CHUNK, MADV_POPULATE_WRITE);
    if (mode == 2) {
      pthread_mutex_lock(&mu);
      while (busy == c) pthread_cond_wait(&cv, &mu);
      int mine = c >= next_c;
      if (mine) next_c = c + 1;
      cursor = c;
      pthread_cond_broadcast(&cv);
      pthread_mutex_unlock(&mu);
      if (mine) madvise(p, CHUNK, MADV_POPULATE_WRITE);
    }
    for (size_t o = 0; o + 272 <= CHUNK; o += 272) memset(p + o, (int)o, 264);
  }
  if (mode == 2) {
    pthread_mutex_lock(&mu);
    stop = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
  }
  printf("mode %d: %.1f ms\n", mode, (now_ns() - t0) / 1e6);
  return 0;
}
