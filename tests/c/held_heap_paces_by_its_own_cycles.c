/* A thread holding a background-collected heap (hl_enter) whose large
 * allocations pass large_trigger_bytes runs each paced cycle itself: no
 * other thread can take the heap, so waiting for the collector thread would
 * wait for nothing -- and a wait lets go of the heap's lock, so the
 * collector's cycle would run under the holder's raw pointers
 * (gc/collector.c hl__pace).  No paced allocation waits; the cycles run
 * while the heap is held, report reason 3 (pacing: "a paced one in a thread that holds the
 * heap, which runs the cycle itself", heaplab.h), and the dead large
 * objects go: the large bytes stay near the trigger, not the total
 * allocated.
 *
 * Why: hl__pace's held branch was executed by no test (make coverage at
 * ee5b4a1, collector.c 151-152): the pacing tests allocate without holding
 * the heap. */
#include "check.h"

enum { N = 400, SIZE = 256 << 10 };
#define TRIGGER (4ull << 20)

int main(void) {
  hl_heap *h = HEAP("collector=background", "large_trigger_bytes=4m", "mark_threads=1");
  uint64_t reasons[8] = {0};
  cycle_reasons_read(h, reasons); /* (none yet) */
  hl_ref keep;
  OK(h, hl_alloc(h, SIZE, 0, &keep));
  uint64_t v = 7;
  OK(h, hl_ref_write(h, keep, 0, &v, sizeof v));

  OK(h, hl_enter(h));
  hl_stats a = stats_of(h);
  uint64_t most = 0;
  for (int i = 0; i < N; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, SIZE, 0, &r)); /* garbage at once */
    OK(h, hl_ref_release(h, r));
    uint64_t live = stats_of(h).large_live_bytes;
    if (live > most) most = live;
  }
  hl_stats b = stats_of(h);
  cycle_reasons_read(h, reasons);
  hl_leave(h);

  uint64_t total = (uint64_t)N * SIZE;
  printf("held: %" PRIu64 " cycles while %" PRIu64 " MiB of large garbage was made (%" PRIu64
         " for pacing), at most %.1f MiB large live\n", b.cycles - a.cycles, total >> 20,
         reasons[3], most / MiB);
  /* a wait would let go of the heap's lock (a condition wait): the
   * collector thread's cycle could then run -- sweep, move -- under the
   * holder's raw pointers */
  CHECK(b.pacing_waits == a.pacing_waits,
        "%" PRIu64 " paced allocations of the holding thread waited for the collector thread",
        b.pacing_waits - a.pacing_waits);
  CHECK(b.cycles - a.cycles >= total / TRIGGER / 2,
        "%" PRIu64 " cycles ran while the heap was held, for %" PRIu64 " MiB past a %llu MiB "
        "large trigger", b.cycles - a.cycles, total >> 20, TRIGGER >> 20);
  CHECK(reasons[3] == b.cycles - a.cycles,
        "of %" PRIu64 " cycles run while held, %" PRIu64 " say pacing (reasons: caller %" PRIu64
        ", small %" PRIu64 ", large %" PRIu64 ", memory %" PRIu64 ")", b.cycles - a.cycles,
        reasons[3], reasons[0], reasons[1], reasons[2], reasons[4]);
  CHECK(most <= 3 * TRIGGER, "%.1f MiB of large objects live at once with a %llu MiB trigger",
        most / MiB, TRIGGER >> 20);
  CHECK(first_word(h, keep) == 7, "the object kept lost its payload");
  check_invariants(h);
  hl_heap_free(h);
  puts("ok");
  return 0;
}
