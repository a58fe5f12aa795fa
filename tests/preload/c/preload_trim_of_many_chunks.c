/*
 * malloc_trim of more than 256 whole 2 MiB chunks returns -- on heaplab,
 * with thp=madvise (the trims plan whole chunks), release_per_sweep raised
 * so that one pass takes them all, and every release refused (EAGAIN,
 * no back-off between retries), so that the frees' own trims give up and
 * back off and the empty pages pile up for the explicit trim.
 *
 * The whole-chunk plan sorted the chunk numbers with glibc's qsort under
 * the heap lock; qsort mallocs a buffer for more than 1 KiB of elements,
 * and in the preloaded library that malloc is the heap's own, which waited
 * for the lock its own thread held: the program hung in malloc_trim for
 * ever (session 42).  The sort allocates nothing now.  The alarm turns the
 * hang into a failure.
 */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 4000
#define BLOCKS 160000 /* 640 MB: 305 chunks of 2 MiB */

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "preload_trim_of_many_chunks: malloc_trim hung\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

int main(void) {
  signal(SIGALRM, on_alarm);
  alarm(30);
  char **v = malloc(BLOCKS * sizeof *v);
  if (!v) return 1;
  for (size_t i = 0; i < BLOCKS; i++) {
    if (!(v[i] = malloc(BLOCK))) {
      fprintf(stderr, "malloc %zu failed\n", i);
      return 1;
    }
    memset(v[i], 1, BLOCK);
  }
  for (size_t i = 0; i < BLOCKS; i++) free(v[i]);
  int r = malloc_trim(0);
  free(v);
  /* the heap still works after it */
  char *p = malloc(BLOCK);
  if (!p) return 1;
  memset(p, 2, BLOCK);
  free(p);
  printf("preload_trim_of_many_chunks: malloc_trim returned %d\n", r);
  return 0;
}
