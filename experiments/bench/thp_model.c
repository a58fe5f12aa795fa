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
 *   thp_model 3                  every chunk written once first, untimed: the timed
 *                                writes go into resident pages (the fill's bound)
 * THP_MODEL_STREAM=1 in the environment writes each object with 16-byte streaming
 * (non-temporal) stores instead of memset -- item 30's experiment: no read of a line
 * before its write, which pays into resident pages and not into pages the kernel has
 * just zeroed (their lines are in the cache).
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

#if defined(__x86_64__)
#include <emmintrin.h>
static int stream;
static void write_object(uint8_t *p, int byte) {
  if (!stream) {
    memset(p, byte, 264);
    return;
  }
  __m128i v = _mm_set1_epi8((char)byte);
  for (int k = 0; k < 272; k += 16) _mm_stream_si128((__m128i *)(p + k), v);
}
static void write_done(void) { _mm_sfence(); }
#else
static int stream;
static void write_object(uint8_t *p, int byte) { memset(p, byte, 264); }
static void write_done(void) {}
#endif

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
  const char *st = getenv("THP_MODEL_STREAM");
  stream = st && atoi(st) != 0;
  if (mode == 3) memset(base, 1, len); /* resident before the timed writes */
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
    for (size_t o = 0; o + 272 <= CHUNK; o += 272) write_object(p + o, (int)o);
  }
  write_done();
  if (mode == 2) {
    pthread_mutex_lock(&mu);
    stop = 1;
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    pthread_join(th, NULL);
  }
  printf("mode %d%s: %.1f ms\n", mode, stream ? " streaming" : "", (now_ns() - t0) / 1e6);
  return 0;
}
