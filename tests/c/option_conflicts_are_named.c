/* Options that are each in range but cannot go together are refused by
 * hl_options_validate -- and so by hl_heap_new, which every binding calls --
 * with HL_EVALUE and a message naming the option and what it needs.  No test
 * reached four of these relations before (make coverage: options.c 505-526
 * never ran), so a change that dropped one would have made a heap that does
 * something else than it was asked: sub-page release with page release off
 * (it runs in the trim that page_release=false turns off), compaction of a
 * manual heap's raw pointers.  Also: a NULL options struct is an error from
 * every options function, not a crash. */
#include "check.h"

/* The defaults with settings (name, value, ..., NULL) set: each accepted alone. */
static hl_options options_with(const char *what, const char *const *settings) {
  hl_options o;
  hl_options_defaults(&o);
  char err[256];
  for (const char *const *s = settings; *s; s += 2) {
    int rc = hl_options_set(&o, s[0], s[1], err, sizeof err);
    CHECK(rc == HL_OK, "%s: %s=%s alone refused: %s", what, s[0], s[1], err);
  }
  return o;
}

static void refused(const char *what, const char *const *settings, const char *needle) {
  hl_options o = options_with(what, settings);
  char err[256] = "";
  int rc = hl_options_validate(&o, err, sizeof err);
  CHECK(rc == HL_EVALUE, "%s: validate returned %s (%s)", what, hl_error_name(rc), err);
  CHECK(strstr(err, needle), "%s: message '%s' does not say '%s'", what, err, needle);
  /* the heap refuses the same, with the same words, and makes nothing */
  hl_heap *h = NULL;
  char herr[256] = "";
  rc = hl_heap_new(&o, &h, herr, sizeof herr);
  CHECK(rc == HL_EVALUE && !h, "%s: hl_heap_new returned %s", what, hl_error_name(rc));
  CHECK(strcmp(err, herr) == 0, "%s: the heap said '%s', validate '%s'", what, herr, err);
}

int main(void) {
  refused("reserve below 16 pages",
          (const char *const[]){"page_size", "256k", "reserve_bytes", "3m", NULL},
          "option reserve_bytes: 3145728 is below 16 pages of page_size 262144");
  refused("sub-page release without page release",
          (const char *const[]){"subpage_release", "true", "page_release", "false", NULL},
          "option subpage_release: needs page_release");
  refused("sub-page release with dump toggles",
          (const char *const[]){"subpage_release", "true", "dump_toggle", "true", NULL},
          "option subpage_release: cannot be combined with dump_toggle");
  refused("compaction of a manual heap",
          (const char *const[]){"mode", "manual", "compact", "sparse", NULL},
          "option compact: needs mode=collected");
  /* the other collected-mode switches, as compact (the option hunt, session
   * 31: accepted on a manual heap, which then counted as needing the write
   * barrier and slowed every other heap's stores) */
  refused("generational manual heap",
          (const char *const[]){"mode", "manual", "generational", "true", NULL},
          "option generational: needs mode=collected");
  refused("background collector of a manual heap",
          (const char *const[]){"mode", "manual", "collector", "background", NULL},
          "option collector: background needs mode=collected");
  refused("page_size not a power of two", (const char *const[]){"page_size", "96k", NULL},
          "option page_size: 98304 is not a power of two");
  refused("small_max above a quarter page",
          (const char *const[]){"page_size", "16k", "small_max", "8k", NULL},
          "option small_max: 8192 exceeds page_size/4 = 4096");
  refused("trigger outside its bounds",
          (const char *const[]){"gc_trigger_bytes", "64k", "gc_trigger_min_bytes", "128k", NULL},
          "option gc_trigger_bytes: 65536 is outside [gc_trigger_min_bytes 131072");
  /* the nursery's bounds too: it was clamped to young_bytes without a word */
  refused("nursery floor above its ceiling",
          (const char *const[]){"generational", "true", "young_min_bytes", "8m", "young_bytes",
                                "1m", NULL},
          "option young_min_bytes: 8388608 exceeds young_bytes 1048576; expected bytes in "
          "[65536, young_bytes 1048576]");

  /* each of those relations holds when the other side is as it needs */
  const char *const *fine[] = {
      (const char *const[]){"page_size", "256k", "reserve_bytes", "4m", NULL},
      (const char *const[]){"subpage_release", "true", NULL},
      (const char *const[]){"mode", "manual", "compact", "never", NULL},
      (const char *const[]){"compact", "sparse", NULL},
      (const char *const[]){"generational", "true", "collector", "background", NULL},
      (const char *const[]){"mode", "manual", "generational", "false", "collector", "sync", NULL},
      /* a parameter of a feature not in use is ignored, not refused */
      (const char *const[]){"collector", "sync", "min_cycle_interval_ms", "50", NULL},
      (const char *const[]){"generational", "true", "young_bytes", "64k", NULL},
      /* (young_min_bytes at its default follows a smaller young_bytes down) */
      (const char *const[]){"young_min_bytes", "1m", "young_bytes", "1m", NULL},
      /* only a generational heap has a nursery: its bounds are not read
       * elsewhere (a manual heap refused them: the review of session 33) */
      (const char *const[]){"young_min_bytes", "8m", "young_bytes", "1m", NULL},
      (const char *const[]){"mode", "manual", "young_min_bytes", "64m", NULL},
  };
  for (size_t k = 0; k < sizeof fine / sizeof fine[0]; k++) {
    hl_options o = options_with(fine[k][0], fine[k]);
    char err[256];
    CHECK(hl_options_validate(&o, err, sizeof err) == HL_OK, "case %zu refused: %s", k, err);
  }

  /* a NULL options struct: an error naming it from every function */
  char err[256];
  int64_t v;
  struct { const char *what; int rc; } nulls[] = {
      {"hl_options_set", hl_options_set(NULL, "warm_pages", "1", err, sizeof err)},
      {"hl_options_set_int", hl_options_set_int(NULL, "warm_pages", 1, err, sizeof err)},
      {"hl_options_set_value",
       hl_options_set_value(NULL, "warm_pages", HL_VALUE_INT, 1, NULL, 0, err, sizeof err)},
      {"hl_options_from_env", hl_options_from_env(NULL, err, sizeof err)},
      {"hl_options_validate", hl_options_validate(NULL, err, sizeof err)},
      {"hl_options_get", hl_options_get(NULL, "warm_pages", &v)},
  };
  for (size_t k = 0; k < sizeof nulls / sizeof nulls[0]; k++)
    CHECK(nulls[k].rc == HL_EINVAL, "%s(NULL) returned %s", nulls[k].what,
          hl_error_name(nulls[k].rc));
  hl_options_validate(NULL, err, sizeof err);
  CHECK(strstr(err, "NULL options struct"), "validate(NULL) says '%s'", err);
  return 0;
}
