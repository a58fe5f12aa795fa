/* hl_resident_bytes while a fill runs with the thp_prefault helper: the
 * chunks the helper has faulted in ahead of the fill are resident, above
 * the last chunk the fill carved from, and must be counted (6c1b26f: the
 * measure runs to hl__prefault_reach, the end of the helper's window).
 * Nothing tested that part: with it taken out (tools/mutants.toml's
 * resident-bytes-ignores-the-prefault-helper) every test passed.
 *
 * Another thread reads, over and over during the fill, what mincore says
 * is resident in the reservation's first 256 MiB, then hl_resident_bytes
 * (it gets the heap lock in the fill's windows: the fill faulting a chunk
 * in itself, or waiting for the helper's).  A plain fill only grows its
 * memory and the helper leaves no chunk unused (thp_prefault_unused 0,
 * checked), so the later reading is never below the earlier one by more
 * than the chunk the fill may have given back at its end.  Where the kernel
 * gives no huge pages or there is one CPU no helper runs: skipped.  Suite
 * threads. */
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check.h"

#define CHUNK ((uint64_t)2 << 20)
#define SPAN ((uint64_t)256 << 20)
#define ROUNDS 6

static hl_heap *h;
static uint8_t *base;
static uint64_t span;
static atomic_int done;
static uint64_t worst, samples;

static void *watcher(void *arg) {
  (void)arg;
  while (!atomic_load(&done)) {
    uint64_t truth = mincore_resident((uintptr_t)base, (uintptr_t)base + span), r;
    OK(h, hl_resident_bytes(h, &r));
    if (truth > r && truth - r > worst) worst = truth - r;
    samples++;
  }
  return NULL;
}

int main(void) {
  uint64_t most = 0, n = 0, chunks = 0;
  for (int round = 0; round < ROUNDS; round++) {
    h = HEAP("thp=populate", "thp_prefault=8", "warm_pages=0");
    hl_stats s0 = stats_of(h);
    if (!s0.thp_enabled || sysconf(_SC_NPROCESSORS_ONLN) < 2) {
      printf("no huge pages or one CPU: no helper runs (skipped)\n");
      hl_heap_free(h);
      return 0;
    }
    uint64_t b, bytes;
    OK(h, hl_heap_range(h, &b, &bytes));
    base = (uint8_t *)(uintptr_t)b;
    span = bytes < SPAN ? bytes : SPAN;
    worst = samples = 0;
    atomic_store(&done, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, watcher, NULL) == 0, "pthread_create");
    hl_ref r;
    OK(h, hl_fill(h, 96u << 20, 248, 0, &r));
    atomic_store(&done, 1);
    pthread_join(t, NULL);
    hl_stats s = stats_of(h);
    CHECK(s.thp_prefault_unused == 0, "the helper left %" PRIu64 " chunks unused",
          s.thp_prefault_unused);
    if (worst > most) most = worst;
    n += samples;
    chunks += s.thp_prefault_chunks;
    OK(h, hl_ref_release(h, r));
    hl_heap_free(h);
  }
  printf("%" PRIu64 " readings over %d fills of 96 MiB (helper: %" PRIu64 " chunks); "
         "resident_bytes below mincore by at most %.2f MiB\n", n, ROUNDS, chunks, most / MiB);
  CHECK(most <= CHUNK, "resident_bytes said %.2f MiB less than was resident during a fill: the "
        "helper's chunks ahead of it not counted", most / MiB);
  return 0;
}
