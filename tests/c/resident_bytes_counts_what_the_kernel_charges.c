/* hl_resident_bytes is what the kernel charges for the heap's reservation:
 * the Rss of its VMAs in /proc/self/smaps.  It counted with mincore, which
 * says "resident" of a page mapped to the kernel's shared zero page -- in no
 * Rss, no Anonymous -- so:
 *
 *   - reading the untouched payloads of 100 objects of 16000 bytes (a read
 *     of a page never written maps the zero page) took resident_bytes to
 *     1.58 MiB while Rss was 0.39 MiB (4x; the hunt of session 31);
 *   - with thp, a partial MADV_FREE of a huge page makes the kernel split
 *     it and map its all-zero subpages to the zero page: resident_bytes
 *     said the whole 2 MiB chunk, Rss 1.12 MiB.
 *
 * Now PAGEMAP_SCAN counts pages present and not the zero page (Linux 6.7;
 * where the kernel has no PAGEMAP_SCAN, mincore: the test says SKIP there).
 * The thp case runs only where the kernel gives huge pages (thp_enabled)
 * and AnonHugePages shows the fill's chunk. */
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <sys/ioctl.h>

#include "check.h"

#define CHUNK ((uint64_t)2 << 20)
#define SLACK ((uint64_t)64 << 10) /* 16 OS pages */

/* Sum of the Rss and AnonHugePages of the smaps VMAs that overlap [lo, hi);
 * *outside: one of them reaches out of it (merged with a neighbour). */
static void smaps_range(uintptr_t lo, uintptr_t hi, uint64_t *rss, uint64_t *huge,
                        bool *outside) {
  FILE *f = fopen("/proc/self/smaps", "r");
  CHECK(f, "/proc/self/smaps: %s", strerror(errno));
  char line[512];
  bool in = false;
  *rss = *huge = 0;
  *outside = false;
  while (fgets(line, sizeof line, f)) {
    uintptr_t a, b;
    uint64_t kb;
    char key[64];
    if (sscanf(line, "%" SCNxPTR "-%" SCNxPTR " ", &a, &b) == 2) { /* a VMA's first line */
      in = a < hi && b > lo;
      if (in && (a < lo || b > hi)) *outside = true;
    } else if (in && sscanf(line, "%63s %" SCNu64, key, &kb) == 2) {
      if (!strcmp(key, "Rss:")) *rss += kb * 1024;
      if (!strcmp(key, "AnonHugePages:")) *huge += kb * 1024;
    }
  }
  fclose(f);
}

/* resident_bytes against the Rss of the heap's range, read before and after
 * it; returns the range's AnonHugePages. */
static uint64_t agrees_with_smaps(hl_heap *h, const char *when) {
  uint64_t base, bytes, rss0, rss1, huge, huge1;
  bool out0, out1;
  OK(h, hl_heap_range(h, &base, &bytes));
  smaps_range(base, base + bytes, &rss0, &huge, &out0);
  uint64_t res = resident_of(h);
  smaps_range(base, base + bytes, &rss1, &huge1, &out1);
  uint64_t lo = rss0 < rss1 ? rss0 : rss1, hi = rss0 < rss1 ? rss1 : rss0;
  printf("  %-44s resident_bytes %8.1f KiB, smaps Rss %8.1f KiB (AnonHugePages %.0f KiB)%s\n",
         when, res / 1024.0, rss1 / 1024.0, huge1 / 1024.0,
         out0 || out1 ? " -- a VMA reaches out of the heap's range: Rss is a bound" : "");
  CHECK(res <= hi + SLACK, "%s: resident_bytes %.1f KiB, but the kernel charges %.1f KiB for "
        "the heap's range (smaps Rss)", when, res / 1024.0, hi / 1024.0);
  if (!out0 && !out1)
    CHECK(res + SLACK >= lo, "%s: resident_bytes %.1f KiB, below the %.1f KiB smaps Rss of the "
          "heap's range", when, res / 1024.0, lo / 1024.0);
  return huge1;
}

/* Untouched payloads read: zero pages, charged nowhere. */
static void zero_pages(void) {
  printf("zero pages:\n");
  hl_heap *h = HEAP("page_size=65536", "small_max=16384");
  agrees_with_smaps(h, "new heap");
  static char buf[16000];
  hl_ref refs[101];
  OK(h, hl_alloc(h, 16000, 0, &refs[0]));
  agrees_with_smaps(h, "alloc(16000)");
  OK(h, hl_ref_read(h, refs[0], 0, buf, sizeof buf));
  agrees_with_smaps(h, "its payload read");
  for (int i = 1; i <= 100; i++) OK(h, hl_alloc(h, 16000, 0, &refs[i]));
  agrees_with_smaps(h, "100 more");
  uint64_t sum, objs;
  for (int i = 1; i <= 100; i++) OK(h, hl_ref_checksum(h, refs[i], &sum, &objs));
  for (int i = 1; i <= 100; i++) OK(h, hl_ref_read(h, refs[i], 0, buf, sizeof buf));
  agrees_with_smaps(h, "their payloads checksummed and read");
  for (int i = 1; i <= 100; i++) OK(h, hl_ref_write(h, refs[i], 0, buf, sizeof buf));
  agrees_with_smaps(h, "their payloads written");
  for (int i = 0; i <= 100; i++) OK(h, hl_ref_release(h, refs[i]));
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
}

static bool thp_possible(void) {
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  char line[128] = "";
  if (f) {
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
  }
  return strstr(line, "[always]") || strstr(line, "[madvise]");
}

/* A huge page partly given back: the kernel splits it, and the subpages
 * never written are the zero page. */
static void partly_released_huge_page(const char *advice) {
  char adv[64];
  snprintf(adv, sizeof adv, "release_advice=%s", advice);
  printf("thp, %s:\n", adv);
  hl_heap *h = HEAP("thp=madvise", adv, "warm_pages=0", "warm_demand_trims=0",
                    "thp_prefault=0", "verify=1");
  hl_ref keep, junk;
  OK(h, hl_alloc(h, 100, 0, &keep));
  OK(h, hl_ref_write(h, keep, 0, "xxxxxxxxxxxxxxxx", 16));
  OK(h, hl_fill(h, 1u << 20, 256, 0, &junk)); /* 16 pages of the first chunk */
  uint64_t huge = agrees_with_smaps(h, "1 MiB fill");
  if (huge < CHUNK) {
    printf("  SKIP the rest: no huge page backs the fill's chunk (AnonHugePages %" PRIu64
           " KiB): the kernel gave none\n", huge / 1024);
  } else {
    OK(h, hl_ref_release(h, junk));
    OK(h, hl_collect(h, 2, 1));
    OK(h, hl_trim(h));
    agrees_with_smaps(h, "dropped, collected, trimmed");
    OK(h, hl_heap_check(h));
  }
  if (huge < CHUNK) OK(h, hl_ref_release(h, junk));
  OK(h, hl_ref_release(h, keep));
  hl_heap_free(h);
}

/* (an argument, "zero" or "thp", runs that part alone) */
/* Has this kernel PAGEMAP_SCAN (Linux 6.7)?  Without it hl_resident_bytes
 * is mincore's count, zero pages included -- the documented fallback, which
 * this test would fail.  (A NULL argument: EFAULT where the ioctl exists,
 * ENOTTY where it does not; 96 bytes is struct pm_scan_arg's size.) */
static bool pagemap_scan_exists(void) {
  int fd = open("/proc/self/pagemap", O_RDONLY);
  if (fd < 0) return false;
  int rc = ioctl(fd, _IOWR('f', 16, char[96]), NULL);
  int e = errno;
  close(fd);
  return rc == 0 || e == EFAULT;
}

int main(int argc, char **argv) {
  const char *only = argc > 1 ? argv[1] : "";
  if (!pagemap_scan_exists()) {
    printf("SKIP: no PAGEMAP_SCAN here (Linux < 6.7, or no /proc): resident_bytes is "
           "mincore's count, the shared zero page included (documented)\n");
    return 77;
  }
  if (!*only || !strcmp(only, "zero")) zero_pages();
  if (*only && strcmp(only, "thp")) return 0;
  if (!thp_possible()) {
    printf("SKIP thp: /sys/kernel/mm/transparent_hugepage/enabled is neither [always] nor "
           "[madvise] (or absent): no huge pages to split\n");
  } else {
    partly_released_huge_page("free");
    partly_released_huge_page("dontneed");
  }
  printf("ok\n");
  return 0;
}
