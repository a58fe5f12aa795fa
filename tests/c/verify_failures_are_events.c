/*
 * Every verify failure is an event verify_failed -- the address the failed
 * check named, the count so far, whether in a cycle -- and its message the
 * heap's last failure: a failure in an allocation's cycle (or a background
 * one) has no caller, and only verify_failures rose (the verify hunt's
 * py4.py: nothing for Python or Lua to read).
 */
#include "check.h"

static size_t failed_events(hl_heap *h, hl_event *out, size_t cap) {
  static hl_event ev[4096];
  size_t n = 0, k = 0;
  OK(h, hl_events_read(h, ev, 4096, &n, 1));
  for (size_t i = 0; i < n; i++)
    if (ev[i].kind == HL_EV_verify_failed && k < cap) out[k++] = ev[i];
  return k;
}

int main(void) {
  CHECK(!strcmp(hl_event_name(HL_EV_verify_failed), "verify_failed") &&
            !strcmp(hl_event_fields(HL_EV_verify_failed), "address,failures,in_cycle"),
        "the kind and its fields");
  hl_heap *h = HEAP("verify=true", "reserve_bytes=64m", "gc_trigger_bytes=4m",
                    "adaptive_trigger=false");
  hl_ref keep[100];
  for (int i = 0; i < 100; i++) OK(h, hl_alloc(h, 40, 1, &keep[i]));
  hl_object_info in;
  OK(h, hl_ref_info(h, keep[7], &in));
  OK(h, hl_ref_release(h, keep[7]));
  OK(h, hl_collect(h, 2, 1));
  hl_event ev[8];
  CHECK(failed_events(h, ev, 8) == 0, "none yet");
  memset((void *)(uintptr_t)(in.address + 8), 'X', 4); /* the defect */
  /* cycles nobody called: an allocation's */
  for (int i = 0; i < 50000 && stats_of(h).verify_failures == 0; i++) {
    hl_ref r;
    OK(h, hl_alloc(h, 200, 0, &r));
    OK(h, hl_ref_release(h, r));
  }
  CHECK(stats_of(h).verify_failures >= 1, "an allocation's cycle failed its verification");
  size_t n = failed_events(h, ev, 8);
  CHECK(n >= 1, "a verify_failed event");
  CHECK(ev[0].nfields == 3 && (uint64_t)ev[0].fields[0] == in.object && ev[0].fields[1] == 1 &&
            ev[0].fields[2] == 1,
        "address %#" PRIx64 " (the slot %#" PRIx64 "), failures %" PRId64 ", in_cycle %" PRId64,
        (uint64_t)ev[0].fields[0], in.object, ev[0].fields[1], ev[0].fields[2]);
  CHECK(strstr(hl_heap_error(h), "written after"), "the heap's error: '%s'", hl_heap_error(h));
  hl_heap_free(h);
  puts("ok");
  return 0;
}
