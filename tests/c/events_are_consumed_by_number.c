/* hl_events_peek / hl_events_consume: a reader that may fail after reading
 * (a binding building its result: a MemoryError, a failing lua_Alloc) peeks,
 * builds, then consumes up to the last event it returns.  Before them the
 * bindings read with clear=1 first and lost every event when building
 * failed (the Lua hunt of session 28).  Proven here: nothing is consumed by
 * a peek; consume takes exactly the numbers asked for, whatever was recorded
 * since; a full ring that dropped some meanwhile is no error; and kept_from
 * tells the reader which of its events another read consumed meanwhile, so
 * each event is returned once. */
#include "check.h"

static size_t waiting(hl_heap *h) {
  hl_event ev[64];
  size_t n;
  OK(h, hl_events_read(h, ev, 64, &n, 0));
  return n;
}

int main(void) {
  hl_heap *h = HEAP("events_capacity=64");
  hl_event ev[64];
  size_t n, m;
  uint64_t first, kept;
  FAILS(h, HL_EINVAL, "NULL first", hl_events_peek(h, ev, 64, &n, NULL));
  for (int i = 0; i < 3; i++) OK(h, hl_collect(h, 1, 0));

  /* a peek consumes nothing; its numbers start at 0 */
  OK(h, hl_events_peek(h, ev, 64, &n, &first));
  CHECK(first == 0 && n >= 4 && ev[0].kind == HL_EV_heap_created, "peek: first %" PRIu64
        ", %zu events", first, n);
  CHECK(waiting(h) == n, "a peek consumed events: %zu left of %zu", waiting(h), n);

  /* events recorded after the peek stay for the next read */
  OK(h, hl_collect(h, 1, 0));
  size_t more = waiting(h) - n;
  CHECK(more >= 1, "a cycle recorded no event");
  OK(h, hl_events_consume(h, first + n, &kept));
  CHECK(kept == 0, "kept_from %" PRIu64 " before any read consumed", kept);
  OK(h, hl_events_peek(h, ev, 64, &m, &first));
  CHECK(m == more && first == n && ev[0].kind == HL_EV_cycle,
        "after consuming %zu: %zu left (expected %zu), first %" PRIu64, n, m, more, first);
  OK(h, hl_events_consume(h, first, &kept)); /* nothing below first is left: no-op */
  CHECK(waiting(h) == more, "consume below the ring's oldest took events");
  /* the consume above counts as a read: a reader after it is told so (a
   * consume that left kept_from behind had the bindings return those events
   * twice -- the mutation events-kept-from-not-advanced, session 40) */
  CHECK(kept == first, "kept_from %" PRIu64 " after a consume of the events below %" PRIu64,
        kept, first);

  /* another read consumed them meanwhile: kept_from says so (each event is
   * returned once), and the consume takes nothing more */
  OK(h, hl_events_peek(h, ev, 64, &m, &first));
  hl_event other[64];
  size_t o;
  OK(h, hl_events_read(h, other, 64, &o, 1));
  CHECK(o == m, "the other read got %zu of %zu", o, m);
  OK(h, hl_collect(h, 1, 0));
  size_t after = waiting(h);
  OK(h, hl_events_consume(h, first + m, &kept));
  CHECK(kept == first + m, "kept_from %" PRIu64 ", expected %" PRIu64 " (all consumed by the "
        "other read)", kept, first + m);
  CHECK(waiting(h) == after, "events recorded after the other read consumed: %zu of %zu left",
        waiting(h), after);
  OK(h, hl_events_read(h, ev, 64, &n, 1));

  /* the full ring drops the oldest of those peeked at meanwhile: consume
   * takes what is left of them and keeps the rest; kept_from still says no
   * read consumed them (the reader returns every one it has) */
  OK(h, hl_events_peek(h, ev, 64, &m, &first));
  CHECK(m == 0, "%zu events left", m);
  for (int i = 0; i < 10; i++) OK(h, hl_collect(h, 1, 0));
  OK(h, hl_events_peek(h, ev, 64, &m, &first));
  uint64_t dropped0 = stats_of(h).events_dropped;
  for (int i = 0; i < 100; i++) OK(h, hl_collect(h, 1, 0));
  uint64_t dropped = stats_of(h).events_dropped - dropped0;
  CHECK(dropped > m, "the ring dropped only %" PRIu64, dropped);
  OK(h, hl_events_consume(h, first + m, &kept));
  CHECK(kept <= first, "kept_from %" PRIu64 " past the peek's first %" PRIu64 ": dropped events "
        "taken for consumed ones", kept, first);
  CHECK(waiting(h) == 64, "the full ring lost events to a consume of dropped ones: %zu",
        waiting(h));
  /* an upto past every event recorded would mark events not yet recorded as
   * consumed by a read (kept_from): the bindings would drop them (the review) */
  OK(h, hl_events_peek(h, ev, 64, &m, &first));
  FAILS(h, HL_EINVAL, "past the events recorded", hl_events_consume(h, first + m + 1, &kept));
  FAILS(h, HL_EINVAL, "past the events recorded", hl_events_consume(h, UINT64_MAX, &kept));
  CHECK(waiting(h) == m, "a refused consume took events");
  OK(h, hl_collect(h, 1, 0));
  OK(h, hl_events_peek(h, ev, 64, &m, &first));
  OK(h, hl_events_consume(h, first + m, &kept));
  CHECK(kept <= first, "kept_from %" PRIu64 " after a refused consume: the events after it "
        "would be dropped by the bindings", kept);
  OK(h, hl_heap_check(h));
  hl_heap_free(h);
  puts("peek consumes nothing; consume takes the numbers asked for; kept_from names another "
       "read's");
  return 0;
}
