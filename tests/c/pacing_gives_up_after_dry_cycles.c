/* Pacing gives up when waiting cannot help.  Background collector, pacing
 * on, a large live set that only grows: every cycle a paced allocation
 * waits for frees nothing on the large path.  After pacing_give_up_cycles
 * such cycles in a row the allocations stop waiting (each skip counted in
 * pacing_gave_up, with a pacing_wait event whose gave_up field is 1), while
 * the collector still runs the cycles they request.  Once a cycle frees
 * large objects again, waiting resumes. */
#include <unistd.h>

#include "check.h"

enum { GIVE_UP = 3, OBJ = 64 << 10, SLOTS = 2048 };

/* Allocate n 64 KiB objects into root slots [*next, *next + n). */
static void grow(hl_heap *h, hl_ref root, uint64_t *next, int n) {
  for (int i = 0; i < n; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, OBJ, 0, &r));
    OK(h, hl_ref_set(h, root, (*next)++ % SLOTS, r));
    OK(h, hl_ref_release(h, r));
  }
}

int main(void) {
  /* a 1 MiB large trigger: every 16 allocations ask for a cycle */
  hl_heap *h = HEAP("collector=background", "large_pacing=true", "large_trigger_bytes=1m",
                    "pacing_give_up_cycles=3", "pacing_max_wait_ms=5000");
  hl_ref root;
  OK(h, hl_alloc(h, 0, SLOTS, &root));
  uint64_t next = 0;

  /* 32 MiB kept: about 32 cycles asked for, none of which frees anything */
  grow(h, root, &next, 512);
  hl_stats a = stats_of(h);
  printf("growing: %" PRIu64 " cycles, %" PRIu64 " waits, %" PRIu64 " gave up, %" PRIu64
         " timeouts\n", a.cycles, a.pacing_waits, a.pacing_gave_up, a.pacing_timeouts);
  CHECK(a.pacing_waits >= 1, "pacing never waited");
  CHECK(a.pacing_waits <= GIVE_UP + 1, "%" PRIu64 " waits for cycles that freed nothing "
        "(pacing_give_up_cycles=%d)", a.pacing_waits, GIVE_UP);
  CHECK(a.pacing_gave_up >= 1, "pacing never gave up (%" PRIu64 " waits)", a.pacing_waits);

  /* the waits have stopped: 32 MiB more, not one wait more */
  grow(h, root, &next, 512);
  hl_stats b = stats_of(h);
  CHECK(b.pacing_waits == a.pacing_waits, "%" PRIu64 " more waits after giving up",
        b.pacing_waits - a.pacing_waits);
  CHECK(b.pacing_gave_up > a.pacing_gave_up, "no more give-ups while the set kept growing");
  /* the collector still runs the cycle they asked for (it may not have been
   * scheduled yet: the mutator no longer waits for it) */
  for (int i = 0; i < 1000 && stats_of(h).cycles == a.cycles; i++) usleep(10000);
  CHECK(stats_of(h).cycles > a.cycles, "no cycle ran after pacing gave up");

  /* the events say so */
  hl_event ev[4096];
  size_t nev = 0, gave_up_events = 0;
  OK(h, hl_events_read(h, ev, 4096, &nev, 1));
  for (size_t i = 0; i < nev; i++)
    if (ev[i].kind == HL_EV_pacing_wait && ev[i].fields[3] == 1) gave_up_events++;
  CHECK(gave_up_events >= 1, "no pacing_wait event with gave_up=1");

  /* a cycle that frees large objects: waiting resumes */
  OK(h, hl_ref_release(h, root));
  OK(h, hl_collect(h, 1, -1));
  hl_stats c = stats_of(h);
  CHECK(c.large_objects == 0, "%" PRIu64 " large objects left", c.large_objects);
  for (int i = 0; i < 256; i++) { /* garbage now: every cycle frees some */
    hl_ref r;
    OK(h, hl_alloc(h, OBJ, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  hl_stats d = stats_of(h);
  printf("after: %" PRIu64 " cycles, %" PRIu64 " waits, %" PRIu64 " gave up\n", d.cycles,
         d.pacing_waits, d.pacing_gave_up);
  CHECK(d.pacing_waits > c.pacing_waits, "pacing did not wait again once cycles freed something");
  hl_heap_free(h);
  return 0;
}
