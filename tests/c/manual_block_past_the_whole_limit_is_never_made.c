/* A manual heap refuses a block larger than the whole heap_limit_bytes
 * before it asks the system allocator for it, as the collected mode does:
 * ENOMEM, "heap_limit_bytes N is less than the M bytes asked: nothing freed
 * can make room".  Before the fix large_new got the whole block first (a
 * mapping of its own) and then refused it: 600 MiB mapped under a 512 MiB
 * limit (the review of session 30's pacing changes).  The mapping shows in
 * the process's VmPeak. */
#include <string.h>

#include "check.h"

static uint64_t vm_peak_kib(void) {
  FILE *f = fopen("/proc/self/status", "r");
  CHECK(f != NULL, "/proc/self/status");
  char line[256];
  uint64_t kib = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "VmPeak: %" SCNu64, &kib) == 1) break;
  fclose(f);
  CHECK(kib > 0, "no VmPeak");
  return kib;
}

int main(void) {
  hl_heap *h = HEAP("mode=manual", "heap_limit_bytes=512m");
  const size_t big = (size_t)600 << 20;
  uint64_t peak0 = vm_peak_kib();
  void *p = hl_malloc(h, big);
  uint64_t grew = (vm_peak_kib() - peak0) >> 10;
  printf("malloc: %p (%s); VmPeak grew %" PRIu64 " MiB\n", p, hl_heap_error(h), grew);
  CHECK(p == NULL, "a block past the whole limit was given");
  CHECK(strstr(hl_heap_error(h), "is less than the 629145600 bytes asked") != NULL,
        "malloc: %s", hl_heap_error(h));
  CHECK(grew < 64, "the refused block was made first: VmPeak grew %" PRIu64 " MiB", grew);
  p = hl_calloc(h, 1, big);
  grew = (vm_peak_kib() - peak0) >> 10;
  CHECK(p == NULL && strstr(hl_heap_error(h), "is less than") != NULL, "calloc: %s",
        hl_heap_error(h));
  CHECK(grew < 64, "calloc: the refused block was made first: VmPeak grew %" PRIu64 " MiB", grew);
  /* a block under the limit is still given */
  p = hl_malloc(h, (size_t)8 << 20);
  CHECK(p != NULL, "malloc 8 MiB: %s", hl_heap_error(h));
  hl_free(h, p);
  check_invariants(h);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
