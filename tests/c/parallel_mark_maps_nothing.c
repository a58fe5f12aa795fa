/* A parallel mark makes no mapping: the helpers' stacks and the packets
 * they share come from one mapping reserved when the heap is made.
 *
 * Why: at vm.max_map_count the kernel still lets one more mapping through
 * (mmap refuses only once the count is past the limit), and with the count
 * past it brk refuses to grow the heap as well, so the main thread's next
 * malloc that needs memory fails.  E6 (docs/experiments/e6.md) ran its heap
 * with mark_threads=1 because with the helpers its checksum after a mark at
 * the limit failed with ENOMEM in 2 runs of 8: the mark had mapped a
 * helper's stack or a packet then.  (Checked by hand: at the limit one mmap
 * of a page succeeds and takes the count to limit + 1, and sbrk then fails
 * with ENOMEM.)
 *
 * Here every mmap the library makes is counted (this file's mmap comes
 * first at link time) while parallel marks run in which a helper takes
 * part.  Before the fix: a helper's first push mapped its 512 KiB stack and
 * a shared packet a page of its own -- this test failed with mmap calls
 * during the collections.  (Not under the sanitizers: their runtimes wrap
 * mmap themselves.) */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <sys/mman.h>

#include "check.h"

static int counting;
static int maps;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  static void *(*real)(void *, size_t, int, int, int, off_t);
  if (!real) real = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
  if (__atomic_load_n(&counting, __ATOMIC_RELAXED)) __atomic_add_fetch(&maps, 1, __ATOMIC_RELAXED);
  return real(addr, len, prot, flags, fd, off);
}

int main(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  return 77; /* skipped */
#endif
  hl_heap *h = HEAP("mark_threads=2");
  hl_ref r;
  /* 64 MiB of 64-byte objects under an index tree: a mark of a million
   * objects, far past the 4,096 a mark makes alone before helpers join */
  OK(h, hl_fill(h, 64 << 20, 64, 0, &r));
  uint64_t used = 0, helper_bytes = 0;
  __atomic_store_n(&counting, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < 6; i++) {
    OK(h, hl_collect(h, 1, 1));
    hl_stats s = stats_of(h);
    if (s.mark_threads_used > used) used = s.mark_threads_used;
    helper_bytes = s.mark_helper_bytes;
  }
  __atomic_store_n(&counting, 0, __ATOMIC_RELAXED);
  CHECK(used >= 2 && helper_bytes > 0, "no helper took part (threads used %llu, helper bytes %llu)",
        (unsigned long long)used, (unsigned long long)helper_bytes);
  CHECK(maps == 0, "%d mmap calls during parallel marks (helpers marked %llu bytes)", maps,
        (unsigned long long)helper_bytes);
  printf("helpers marked %llu bytes, no mapping made\n", (unsigned long long)helper_bytes);
  OK(h, hl_ref_release(h, r));
  hl_heap_free(h);
  return 0;
}
