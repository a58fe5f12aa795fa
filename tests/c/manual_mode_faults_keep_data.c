/* Injected faults never touch a manual heap's data: with every restore
 * failing (EIO) and the primary release advice refused for a while (ENOMEM),
 * rounds of allocation and frees keep every live block intact, produce the
 * same digest as the uninjected run, never reuse a page whose restore failed,
 * and still give the emptied pages back once the refusals stop (fallback,
 * then upgrade; or, without a fallback, a later trim). */
#include <errno.h>
#include <stdint.h>

#include "check.h"

#define ROUNDS 6
#define ROUND_BYTES (24ull << 20)
#define MAXBLOCKS (ROUNDS * ROUND_BYTES / 16)

static void **live;
static size_t *live_size;
static size_t nlive;

static uint64_t digest_of(void) {
  uint64_t d = 1469598103934665603ull;
  for (size_t i = 0; i < nlive; i++) {
    const unsigned char *p = live[i];
    for (size_t k = 0; k < live_size[i]; k++) d = (d ^ p[k]) * 1099511628211ull;
  }
  return d;
}

/* Rounds: allocate ROUND_BYTES, keep the first eighth, free the rest (so
 * whole pages empty, are released, and are wanted again next round). */
static uint64_t run(hl_heap *h, uint64_t *resident_end) {
  uint64_t x = 0x2545F4914F6CDD1Dull;
  static void *round_blocks[ROUND_BYTES / 16];
  static size_t round_sizes[ROUND_BYTES / 16];
  nlive = 0;
  for (int r = 0; r < ROUNDS; r++) {
    size_t n = 0;
    for (uint64_t bytes = 0; bytes < ROUND_BYTES;) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t size = 16 + (x >> 9) % 497;
      unsigned char *b = hl_malloc(h, size);
      CHECK(b, "malloc failed in round %d: %s", r, hl_heap_error(h));
      for (size_t k = 0; k < size; k++) b[k] = (unsigned char)(x >> (k & 31));
      round_blocks[n] = b;
      round_sizes[n++] = size;
      bytes += size;
    }
    for (size_t i = 0; i < n; i++) {
      if (i < n / 8) {
        live[nlive] = round_blocks[i];
        live_size[nlive++] = round_sizes[i];
      } else {
        hl_free_sized(h, round_blocks[i], round_sizes[i]);
      }
    }
    hl_thread_flush(h);
    check_invariants(h);
  }
  uint64_t d = digest_of();
  for (size_t i = 0; i < nlive; i++) hl_free(h, live[i]);
  hl_thread_flush(h);
  /* asked trims until the empty pages are out: trims nobody asked for back
   * off after one whose every run was refused (docs/design.md, Trims back
   * off), so the refusals of the no-fallback run may outlast the rounds;
   * each asked trim runs, and the refusals (first 300 calls) run out */
  for (int i = 0; i < 600; i++) {
    OK(h, hl_trim(h));
    if (stats_of(h).free_pool_pages <= 8) break;
  }
  *resident_end = resident_of(h);
  check_invariants(h);
  return d;
}

int main(void) {
  live = malloc(sizeof(void *) * MAXBLOCKS);
  live_size = malloc(sizeof(size_t) * MAXBLOCKS);
  CHECK(live && live_size, "test arrays");
  uint64_t res_clean, res_faulty, res_none;

  hl_heap *h = HEAP("mode=manual", "warm_pages=8");
  uint64_t clean = run(h, &res_clean);
  hl_stats sc = stats_of(h);
  hl_heap_free(h);

  /* every restore fails; the primary advice is refused for 300 calls and
   * the fallback (MADV_FREE) takes those pages, upgraded later */
  h = HEAP("mode=manual", "warm_pages=8");
  OK(h, hl_inject(h, HL_SITE_restore, HL_FAULT_always, 0, EIO));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_first, 300, ENOMEM));
  uint64_t faulty = run(h, &res_faulty);
  hl_stats sf = stats_of(h);
  hl_heap_free(h);

  /* the same refusals without a fallback: pages stay in the free pool and a
   * later trim releases them (an asked one: the others back off after a
   * trim whose every run was refused) */
  h = HEAP("mode=manual", "warm_pages=8", "fallback_advice=none");
  OK(h, hl_inject(h, HL_SITE_restore, HL_FAULT_always, 0, EIO));
  OK(h, hl_inject(h, HL_SITE_release, HL_FAULT_first, 300, ENOMEM));
  uint64_t none = run(h, &res_none);
  hl_stats sn = stats_of(h);
  hl_heap_free(h);

  printf("clean: %" PRIu64 " pages carved, %" PRIu64 " reused, %.1f MiB resident at the end\n",
         sc.total_pages, sc.reused_pages, res_clean / MiB);
  printf("faults: %" PRIu64 " carved, %" PRIu64 " restores failed, %" PRIu64 " reused, %" PRIu64
         " fallback, %" PRIu64 " upgraded, %.1f MiB resident at the end\n",
         sf.total_pages, sf.restore_failed_pages, sf.reused_pages, sf.fallback_pages,
         sf.upgraded_pages, res_faulty / MiB);
  printf("no fallback: %" PRIu64 " rejected, %" PRIu64 " released, %.1f MiB resident\n",
         sn.rejected_pages, sn.released_pages, res_none / MiB);

  CHECK(faulty == clean && none == clean, "digests differ: clean %" PRIx64 ", faulty %" PRIx64
        ", no fallback %" PRIx64, clean, faulty, none);
  CHECK(sc.reused_pages > 0, "the clean run never reused a released page");
  CHECK(sf.restore_failed_pages > 0 && sf.reused_pages == 0,
        "restores: %" PRIu64 " failed, %" PRIu64 " reused", sf.restore_failed_pages,
        sf.reused_pages);
  CHECK(sf.fallback_pages > 0 && sf.upgraded_pages > 0, "fallback %" PRIu64 ", upgraded %" PRIu64,
        sf.fallback_pages, sf.upgraded_pages);
  CHECK(sn.rejected_pages > 0 && sn.released_pages > 0, "rejected %" PRIu64 ", released %" PRIu64,
        sn.rejected_pages, sn.released_pages);
  /* growth stays bounded: fresh pages replace the unusable ones, at most
   * one round's worth per round */
  CHECK(sf.total_pages <= sc.total_pages + (uint64_t)ROUNDS * (ROUND_BYTES >> 16) * 2,
        "faulty run carved %" PRIu64 " pages", sf.total_pages);
  /* and the pages still go back to the OS.  Fallback (MADV_FREE) pages
   * that were never upgraded stay resident until the kernel reclaims them:
   * with every restore failing, some of them end up parked in the
   * reuse-failed pool, which upgrades do not visit. */
  uint64_t allowed = 8 * 65536 + 64 * 65536;
  uint64_t lazy = (sf.fallback_pages - sf.upgraded_pages) * 65536;
  CHECK(res_none <= allowed && res_clean <= allowed && res_faulty <= allowed + lazy,
        "resident at the end: clean %.1f, faulty %.1f (%.1f lazily free), no fallback %.1f MiB",
        res_clean / MiB, res_faulty / MiB, lazy / MiB, res_none / MiB);
  free(live);
  free(live_size);
  return 0;
}
