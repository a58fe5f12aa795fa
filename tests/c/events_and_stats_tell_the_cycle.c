/* Events are structured records read through the API (never parsed from
 * stderr), and the stats add up with them: cycles, major sweeps, trims. */
#include "check.h"

int main(void) {
  hl_heap *h = HEAP("events_capacity=64");
  hl_event ev[64];
  size_t n;
  OK(h, hl_events_read(h, ev, 64, &n, 1));
  CHECK(n == 1 && ev[0].kind == HL_EV_heap_created, "first event: %zu", n);
  CHECK(strcmp(hl_event_name(HL_EV_trim), "trim") == 0 &&
            strstr(hl_event_fields(HL_EV_trim), "released"), "event declarations");
  hl_ref r;
  OK(h, hl_fill(h, 32u << 20, 256, 0, &r));
  OK(h, hl_ref_release(h, r));
  OK(h, hl_collect(h, 3, -1));
  OK(h, hl_events_read(h, ev, 64, &n, 1));
  uint64_t cycles = 0, majors = 0, released = 0;
  for (size_t i = 0; i < n; i++) {
    if (ev[i].kind == HL_EV_cycle) cycles++;
    if (ev[i].kind == HL_EV_major_sweep) majors++;
    if (ev[i].kind == HL_EV_trim) released += (uint64_t)ev[i].fields[0];
    CHECK(i == 0 || ev[i].time_ns >= ev[i - 1].time_ns, "events out of order");
  }
  hl_stats s = stats_of(h);
  CHECK(cycles == s.cycles && majors == s.major_sweeps && released == s.released_pages,
        "events %" PRIu64 "/%" PRIu64 "/%" PRIu64 " vs stats %" PRIu64 "/%" PRIu64 "/%" PRIu64,
        cycles, majors, released, s.cycles, s.major_sweeps, s.released_pages);
  OK(h, hl_events_read(h, ev, 64, &n, 0));
  CHECK(n == 0, "events not consumed");
  /* overflow: the oldest are dropped and counted */
  for (int i = 0; i < 100; i++) OK(h, hl_collect(h, 1, 0));
  OK(h, hl_events_read(h, ev, 64, &n, 1));
  CHECK(n == 64 && stats_of(h).events_dropped >= 36, "overflow: %zu read, %" PRIu64 " dropped", n,
        stats_of(h).events_dropped);
  hl_heap_free(h);
  return 0;
}
