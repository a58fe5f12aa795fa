/* The helper threads of parallel marking never call malloc: a thread that
 * does gets a glibc arena of its own (64 MiB of address space, its first
 * pages resident) -- a per-thread cost in the footprint the experiments
 * measure -- and with several arenas an allocation at vm.max_map_count was
 * served from one that could not grow (E6's checksum failed with ENOMEM).
 * Checked through malloc_info(3), which lists one <heap> per arena: after
 * parallel marks in which a helper took part, the process still has the
 * main thread's arena only.  (Not under the sanitizers: their allocators
 * replace glibc's.) */
#include <malloc.h>
#include <stdlib.h>

#include "check.h"

static int arenas(void) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CHECK(f, "open_memstream");
  CHECK(malloc_info(0, f) == 0, "malloc_info");
  fclose(f);
  int n = 0;
  for (const char *p = buf; (p = strstr(p, "<heap nr=")) != NULL; p++) n++;
  free(buf);
  return n;
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 77; /* skipped */
#endif
  void *warm = malloc(64); /* the main thread's arena exists */
  int before = arenas();
  hl_heap *h = HEAP("mark_threads=2");
  hl_ref r;
  /* 64 MiB of 64-byte objects under an index tree: a mark of a million
   * objects, far past the 4,096 a mark makes alone before helpers join */
  OK(h, hl_fill(h, 64 << 20, 64, 0, &r));
  uint64_t used = 0, helper_bytes = 0;
  for (int i = 0; i < 6; i++) {
    OK(h, hl_collect(h, 1, 1));
    hl_stats s = stats_of(h);
    if (s.mark_threads_used > used) used = s.mark_threads_used;
    helper_bytes = s.mark_helper_bytes;
  }
  CHECK(used >= 2 && helper_bytes > 0, "no helper took part (threads used %llu, helper bytes %llu)",
        (unsigned long long)used, (unsigned long long)helper_bytes);
  int after = arenas();
  CHECK(after == before, "malloc arenas %d before the parallel marks, %d after: a helper called malloc",
        before, after);
  printf("%d arena(s); helpers marked %llu bytes\n", after, (unsigned long long)helper_bytes);
  OK(h, hl_ref_release(h, r));
  hl_heap_free(h);
  free(warm);
  return 0;
}
