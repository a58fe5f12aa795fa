/* Generational mode: the nursery follows what minor cycles keep --
 * young_survival_factor (16) times the bytes recent minor cycles marked,
 * between young_min_bytes and young_bytes.  Garbage that dies at once gets
 * the smallest nursery (it stays in the cache); a structure that outlives
 * a minor cycle grows it back to young_bytes, so that it is not promoted a
 * nursery at a time.  young_min_bytes = young_bytes is the fixed nursery.
 * (binary-trees at depth 20: docs/performance.md, item 29.) */
#include "check.h"

#define OBJ_PAYLOAD 48 /* + an 8-byte header and one slot: 64-byte objects */

static void *roots[1];

/* bytes of 64-byte objects, dropped as soon as they are made */
static void garbage(hl_heap *h, uint64_t bytes) {
  hl_enter(h);
  for (uint64_t i = 0; i < bytes / 64; i++)
    CHECK(hl_obj_new(h, OBJ_PAYLOAD, 1), "alloc: %s", hl_heap_error(h));
  hl_leave(h);
}

/* a list of bytes of 64-byte objects, rooted */
static void keep(hl_heap *h, uint64_t bytes) {
  hl_enter(h);
  for (uint64_t i = 0; i < bytes / 64; i++) {
    void *o = hl_obj_new(h, OBJ_PAYLOAD, 1);
    CHECK(o, "alloc: %s", hl_heap_error(h));
    hl_obj_set(o, 0, roots[0]);
    roots[0] = o;
  }
  hl_leave(h);
}

static hl_heap *heap(const char *young_min) {
  hl_heap *h = HEAP("generational=true", "young_bytes=16m", young_min, "mark_threads=1",
                    "page_size=4k", "page_release=false", "verify=true", "events_capacity=65536");
  OK(h, hl_roots_add(h, roots, 1, 0));
  roots[0] = NULL;
  return h;
}

static void done(hl_heap *h) {
  CHECK(stats_of(h).verify_failures == 0, "verify: %s", hl_heap_error(h));
  OK(h, hl_roots_remove(h, roots));
  check_invariants(h);
  hl_heap_free(h);
}

int main(void) {
  const uint64_t M = 1 << 20;
  hl_heap *h = heap("young_min_bytes=1m");
  hl_stats s0 = stats_of(h);
  CHECK(s0.gc_trigger_bytes == 16 * M, "a new heap's nursery is %" PRIu64 ", not young_bytes",
        s0.gc_trigger_bytes);
  garbage(h, 48 * M);
  hl_stats s1 = stats_of(h);
  printf("garbage: %" PRIu64 " minor cycles for 48 MiB, nursery %.1f MiB\n",
         s1.minor_cycles - s0.minor_cycles, s1.gc_trigger_bytes / MiB);
  CHECK(s1.gc_trigger_bytes == 1 * M, "nothing survives, and the nursery is %.2f MiB, not "
        "young_min_bytes", s1.gc_trigger_bytes / MiB);
  /* a fixed 16 MiB nursery would run 3 */
  CHECK(s1.minor_cycles - s0.minor_cycles >= 24, "%" PRIu64 " minor cycles for 48 MiB",
        s1.minor_cycles - s0.minor_cycles);

  /* a list that outlives every minor cycle: the nursery grows back */
  keep(h, 12 * M);
  hl_stats s2 = stats_of(h);
  printf("a 12 MiB list: nursery %.1f MiB, %.1f MiB promoted\n", s2.gc_trigger_bytes / MiB,
         (s2.promoted_bytes - s1.promoted_bytes) / MiB);
  CHECK(s2.gc_trigger_bytes == 16 * M, "the list survives every minor cycle, and the nursery "
        "is %.2f MiB, not young_bytes", s2.gc_trigger_bytes / MiB);

  /* the list stays; garbage again: the nursery shrinks, the list is kept */
  garbage(h, 128 * M); /* (each minor cycle halves the weight of the list's: five
                          * of 16 MiB, then smaller ones) */
  hl_stats s3 = stats_of(h);
  CHECK(s3.gc_trigger_bytes == 1 * M, "garbage again, and the nursery is %.2f MiB",
        s3.gc_trigger_bytes / MiB);
  uint64_t n = 0;
  for (void *o = roots[0]; o; o = hl_obj_slots(o)[0]) n++;
  CHECK(n == 12 * M / 64, "the list has %" PRIu64 " objects of %" PRIu64, n, 12 * M / 64);

  /* each change is an event: old, new, and the percent of the bytes
   * allocated since the last cycle that it kept */
  static hl_event ev[65536];
  size_t count = 0, shrank = 0, grew = 0;
  OK(h, hl_events_read(h, ev, 65536, &count, 1));
  for (size_t i = 0; i < count; i++) {
    if (ev[i].kind != HL_EV_nursery_adapted) continue;
    CHECK(ev[i].nfields == 3, "nursery_adapted has %d fields", ev[i].nfields);
    CHECK(ev[i].fields[0] != ev[i].fields[1], "an event for no change");
    CHECK(ev[i].fields[1] >= (int64_t)M && ev[i].fields[1] <= 16 * (int64_t)M,
          "nursery %" PRId64 " outside [young_min_bytes, young_bytes]", ev[i].fields[1]);
    CHECK(ev[i].fields[2] >= 0 && ev[i].fields[2] <= 100, "kept_pct %" PRId64, ev[i].fields[2]);
    if (ev[i].fields[1] < ev[i].fields[0]) shrank++;
    else grew++;
  }
  CHECK(shrank >= 2 && grew >= 1, "%zu nursery_adapted events shrank it and %zu grew it", shrank,
        grew);
  roots[0] = NULL;
  done(h);

  /* kept_pct is of everything allocated since the last cycle: a list whose
   * every 8th object holds a large block (kept, both) reported 25,818%
   * when only the small path's bytes were counted */
  h = heap("young_min_bytes=1m");
  garbage(h, 48 * M); /* (the nursery down to 1 MiB: the list's cycles grow it) */
  OK(h, hl_events_read(h, ev, 65536, &count, 1));
  hl_enter(h);
  for (int i = 0; i < 4096; i++) {
    void *o = hl_obj_new(h, OBJ_PAYLOAD - 8, 2);
    CHECK(o, "alloc: %s", hl_heap_error(h));
    hl_obj_set(o, 0, roots[0]);
    roots[0] = o;
    if (i % 8 == 0) {
      void *big = hl_obj_new(h, 128 << 10, 0);
      CHECK(big, "alloc: %s", hl_heap_error(h));
      hl_obj_set(o, 1, big);
    }
  }
  hl_leave(h);
  OK(h, hl_events_read(h, ev, 65536, &count, 1));
  size_t seen = 0;
  for (size_t i = 0; i < count; i++) {
    if (ev[i].kind != HL_EV_nursery_adapted) continue;
    seen++;
    CHECK(ev[i].fields[2] >= 0 && ev[i].fields[2] <= 100,
          "kept_pct %" PRId64 " with large blocks kept", ev[i].fields[2]);
  }
  CHECK(seen >= 1, "no nursery_adapted event while large blocks were kept");
  roots[0] = NULL;
  done(h);

  /* young_min_bytes = young_bytes: a fixed nursery */
  h = heap("young_min_bytes=16m");
  s0 = stats_of(h);
  garbage(h, 48 * M);
  s1 = stats_of(h);
  CHECK(s1.gc_trigger_bytes == 16 * M && s1.minor_cycles - s0.minor_cycles <= 3,
        "a fixed nursery: %.2f MiB, %" PRIu64 " minor cycles for 48 MiB", s1.gc_trigger_bytes / MiB,
        s1.minor_cycles - s0.minor_cycles);
  done(h);
  return 0;
}
