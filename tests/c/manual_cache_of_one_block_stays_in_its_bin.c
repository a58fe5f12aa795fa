/* A thread cache of tcache_blocks=1 (the option's smallest non-zero value)
 * holds one block per class and never writes past it.  A free into a full
 * cache sends half of it home, n / 2 blocks -- none when the cache holds
 * one -- and the freed block was pushed past the end of its bin, into the
 * next class's: that class's cached block was lost and the pushed one handed
 * out as a block of the wrong class (heaplab-python and
 * libheaplab-malloc.so with HEAPLAB_TCACHE_BLOCKS=1 crashed at once).
 *
 * Blocks of several classes are churned in an interleaved order, each
 * filled with a pattern of its own: every live block keeps its pattern (no
 * two live blocks overlap), and once everything is freed and the cache
 * flushed no byte is left live.  tcache_blocks 2 and 3 as well. */
#include "check.h"

#define LIVE 512

static uint32_t rng = 12345;
static uint32_t next_rand(void) {
  rng = rng * 1103515245u + 12345u;
  return rng >> 8;
}

static void churn(const char *blocks_opt) {
  hl_heap *h = HEAP("mode=manual", blocks_opt);
  static const size_t sizes[] = {16, 32, 48, 64, 100, 200, 500, 1000, 3000};
  enum { NS = sizeof sizes / sizeof sizes[0] };
  unsigned char *live[LIVE] = {0};
  size_t len[LIVE] = {0};
  unsigned char tag[LIVE] = {0};
  for (int round = 0; round < 200000; round++) {
    uint32_t i = next_rand() % LIVE;
    if (live[i]) {
      for (size_t k = 0; k < len[i]; k++)
        CHECK(live[i][k] == tag[i], "%s: block %u (%zu bytes) byte %zu is %u, expected %u: "
              "another block overlaps it", blocks_opt, i, len[i], k, live[i][k], tag[i]);
      hl_free(h, live[i]);
      live[i] = NULL;
    } else {
      len[i] = sizes[next_rand() % NS];
      live[i] = hl_malloc(h, len[i]);
      CHECK(live[i], "%s: malloc(%zu): %s", blocks_opt, len[i], hl_heap_error(h));
      tag[i] = (unsigned char)(1 + round % 251);
      memset(live[i], tag[i], len[i]);
    }
  }
  for (uint32_t i = 0; i < LIVE; i++)
    if (live[i]) {
      for (size_t k = 0; k < len[i]; k++)
        CHECK(live[i][k] == tag[i], "%s: block %u byte %zu overwritten", blocks_opt, i, k);
      hl_free(h, live[i]);
    }
  hl_thread_flush(h);
  hl_stats st = stats_of(h);
  CHECK(st.small_live_bytes == 0, "%s: %" PRIu64 " bytes still live after every block was freed "
        "(cached blocks lost)", blocks_opt, st.small_live_bytes);
  CHECK(st.manual_mallocs == st.manual_frees, "%s: %" PRIu64 " mallocs, %" PRIu64 " frees",
        blocks_opt, st.manual_mallocs, st.manual_frees);
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
  churn("tcache_blocks=1");
  churn("tcache_blocks=2");
  churn("tcache_blocks=3");
  printf("tcache_blocks 1, 2, 3: every block intact, nothing left live\n");
  return 0;
}
