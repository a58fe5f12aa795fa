/* Options are one declaration: defaults, HEAPLAB_<NAME> environment
 * overrides, string and number setters, and errors naming the option and its
 * allowed range -- for the environment too. */
#include <ctype.h>

#include "check.h"

/* A collected-only option i's variable and a value other than its default
 * (its max, else its min); false for any other option. */
static bool collected_var(int i, char *var, char *val) {
  hl_option_info info;
  if (hl_option_info_get(i, &info) != HL_OK || !info.collected_only) return false;
  int64_t v = info.def != info.max ? info.max : info.min;
  snprintf(var, 96, "HEAPLAB_");
  for (const char *p = info.name; *p; p++) {
    size_t n = strlen(var);
    var[n] = (char)toupper((unsigned char)*p), var[n + 1] = 0;
  }
  if (info.kind == HL_OPT_ENUM) snprintf(val, 64, "%s", hl_option_choice(i, v));
  else snprintf(val, 64, "%" PRId64, v);
  return true;
}

int main(void) {
  char err[256];
  hl_options o;
  CHECK(hl_option_count() > 30, "%d options", hl_option_count());
  hl_option_info info;
  int i = hl_option_index("release_advice");
  CHECK(i >= 0 && hl_option_info_get(i, &info) == HL_OK && info.kind == HL_OPT_ENUM &&
            strcmp(info.choices, "dontneed,free") == 0, "release_advice declaration");
  hl_options_defaults(&o);
  CHECK(o.page_size == 65536 && o.warm_pages == 64 && o.syscall_retry_max == 100, "defaults");

  setenv("HEAPLAB_WARM_PAGES", "7", 1);
  setenv("HEAPLAB_RESERVE_BYTES", "2g", 1);
  setenv("HEAPLAB_REUSE_FAILED_ORDER", "lifo", 1);
  setenv("HEAPLAB_PAGE_RELEASE", "off", 1);
  CHECK(hl_options_from_env(&o, err, sizeof err) == HL_OK, "%s", err);
  CHECK(o.warm_pages == 7 && o.reserve_bytes == (int64_t)2 << 30 && o.reuse_failed_order == 1 &&
            o.page_release == 0, "environment not applied");

  /* NULL options = defaults + environment */
  hl_heap *h = NULL;
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_OK, "%s", err);
  hl_options eff;
  OK(h, hl_heap_options(h, &eff));
  CHECK(eff.warm_pages == 7, "heap did not take the environment");
  uint64_t base, bytes;
  OK(h, hl_heap_range(h, &base, &bytes));
  CHECK(bytes == (uint64_t)2 << 30, "reserved %" PRIu64, bytes);
  hl_heap_free(h);

  setenv("HEAPLAB_WARM_PAGES", "-3", 1);
  CHECK(hl_options_from_env(&o, err, sizeof err) == HL_EVALUE &&
            strstr(err, "HEAPLAB_WARM_PAGES") && strstr(err, "[0, 1048576]"), "%s", err);
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_EVALUE && !h, "bad env accepted");
  unsetenv("HEAPLAB_WARM_PAGES");

  setenv("HEAPLAB_FAULT_RESTORE", "sometimes:EIO", 1);
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_EVALUE && strstr(err, "HEAPLAB_FAULT_RESTORE"),
        "bad fault spec: %s", err);
  setenv("HEAPLAB_FAULT_RESTORE", "first:5:EIO", 1);
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_OK, "%s", err);
  hl_fault_state f[HL_SITE_COUNT];
  size_t n;
  OK(h, hl_faults_get(h, f, HL_SITE_COUNT, &n));
  CHECK(f[HL_SITE_restore].mode == HL_FAULT_first && f[HL_SITE_restore].arg == 5 &&
            f[HL_SITE_restore].err == 5, "fault from the environment not armed");
  hl_heap_free(h);
  /* the spec's numbers (the release hunt, session 25): '+5' and ' 5' were
   * taken for errno names and armed errno 5 with N 0 -- a schedule that
   * never fired -- and a numeric ERRNO after N was "two numbers" */
  static const struct {
    const char *spec;
    int64_t arg;
    int err; /* 0: refused */
  } specs[] = {{"first:+5", 5, ENOMEM}, {"first:5:11", 5, 11}, {"first:5:+11", 5, 11},
               {"first:EIO:7", 7, EIO}, {"every:3:EAGAIN", 3, EAGAIN}, {"first: 5", 0, 0},
               {"first:5: 11", 0, 0}, {"first:5:11:12", 0, 0}, {"first:5x", 0, 0},
               {"first:5:0", 0, 0}};
  for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
    setenv("HEAPLAB_FAULT_RESTORE", specs[i].spec, 1);
    int rc = hl_heap_new(NULL, &h, err, sizeof err);
    if (!specs[i].err) {
      CHECK(rc == HL_EVALUE && !h && strstr(err, "HEAPLAB_FAULT_RESTORE"),
            "spec '%s' accepted (rc %d): %s", specs[i].spec, rc, err);
      continue;
    }
    CHECK(rc == HL_OK, "spec '%s': %s", specs[i].spec, err);
    OK(h, hl_faults_get(h, f, HL_SITE_COUNT, &n));
    CHECK(f[HL_SITE_restore].arg == specs[i].arg && f[HL_SITE_restore].err == specs[i].err,
          "spec '%s': N %" PRId64 ", errno %d (want %" PRId64 ", %d)", specs[i].spec,
          f[HL_SITE_restore].arg, f[HL_SITE_restore].err, specs[i].arg, specs[i].err);
    hl_heap_free(h);
  }
  /* set but empty: a fault site armed with nothing (an empty option value
   * is an error: docs/clients.md) */
  setenv("HEAPLAB_FAULT_RESTORE", "", 1);
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_OK, "%s", err);
  OK(h, hl_faults_get(h, f, HL_SITE_COUNT, &n));
  CHECK(f[HL_SITE_restore].mode == HL_FAULT_off, "an empty fault variable armed the site");
  hl_heap_free(h);
  unsetenv("HEAPLAB_FAULT_RESTORE");
  setenv("HEAPLAB_WARM_PAGES", "", 1);
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_EVALUE && strstr(err, "HEAPLAB_WARM_PAGES") &&
            strstr(err, "empty"), "an empty option value: %s", err);
  unsetenv("HEAPLAB_WARM_PAGES");

  /* a reservation the kernel refuses steps down */
  setenv("HEAPLAB_FAULT_RESERVE", "first:3:ENOMEM", 1);
  unsetenv("HEAPLAB_RESERVE_BYTES");
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_OK, "%s", err);
  OK(h, hl_heap_range(h, &base, &bytes));
  CHECK(bytes == ((uint64_t)32 << 30) >> 3, "after 3 refusals reserved %" PRIu64, bytes);
  hl_heap_free(h);
  unsetenv("HEAPLAB_FAULT_RESERVE");

  /* The collector's switches in the environment apply to the collected
   * heaps: a manual heap ignores them (HEAPLAB_GENERATIONAL=1 exported made
   * every manual heap fail "option generational: needs mode=collected");
   * set explicitly, they are still refused. */
  setenv("HEAPLAB_GENERATIONAL", "1", 1);
  setenv("HEAPLAB_COLLECTOR", "background", 1);
  setenv("HEAPLAB_COMPACT", "sparse", 1);
  setenv("HEAPLAB_RESERVE_BYTES", "64m", 1);
  hl_options_defaults(&o);
  o.mode = HL_MODE_MANUAL;
  CHECK(hl_options_from_env(&o, err, sizeof err) == HL_OK, "%s", err);
  CHECK(!o.generational && o.collector == HL_COLLECTOR_SYNC && o.compact == HL_COMPACT_NEVER,
        "manual: generational %" PRId64 " collector %" PRId64 " compact %" PRId64, o.generational,
        o.collector, o.compact);
  CHECK(o.reserve_bytes == 64 << 20, "manual: the other options still apply");
  CHECK(hl_heap_new(&o, &h, err, sizeof err) == HL_OK, "manual heap: %s", err);
  hl_heap_free(h);
  hl_options_defaults(&o); /* a collected heap takes them */
  CHECK(hl_options_from_env(&o, err, sizeof err) == HL_OK, "%s", err);
  CHECK(o.generational && o.collector == HL_COLLECTOR_BACKGROUND && o.compact != HL_COMPACT_NEVER,
        "collected: the environment's switches not applied");
  CHECK(hl_options_validate(&o, err, sizeof err) == HL_OK, "%s", err);
  /* explicit (skipped by the environment): refused */
  hl_options_defaults(&o);
  o.mode = HL_MODE_MANUAL;
  o.generational = 1;
  const char *const skip[] = {"generational"};
  CHECK(hl_options_from_env_except(&o, skip, 1, err, sizeof err) == HL_OK, "%s", err);
  CHECK(hl_options_validate(&o, err, sizeof err) == HL_EVALUE &&
            strstr(err, "generational: needs mode=collected"),
        "explicit generational on a manual heap: '%s'", err);
  /* HEAPLAB_MODE=manual: hl_heap_new(NULL) makes a manual heap */
  setenv("HEAPLAB_MODE", "manual", 1);
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_OK, "HEAPLAB_MODE=manual: %s", err);
  hl_options e;
  OK(h, hl_heap_options(h, &e));
  CHECK(e.mode == HL_MODE_MANUAL && !e.generational, "HEAPLAB_MODE=manual: mode %" PRId64, e.mode);
  hl_heap_free(h);
  unsetenv("HEAPLAB_MODE");
  unsetenv("HEAPLAB_GENERATIONAL");
  unsetenv("HEAPLAB_COLLECTOR");
  unsetenv("HEAPLAB_COMPACT");
  unsetenv("HEAPLAB_RESERVE_BYTES");

  /* Every collected-only option (the table's heaps column, COLLECTED) is
   * ignored from the environment on a manual heap -- not only the three
   * switches above: HEAPLAB_YOUNG_MIN_BYTES=64m made every manual heap fail
   * "option young_min_bytes: ... exceeds young_bytes" and the preloaded
   * library fall back to the system allocator (the review of session 33) --
   * and applied on a collected one.  What manual mode reads is not. */
  const char *const collected[] = {"generational", "collector", "compact", "gc_trigger_bytes",
      "gc_trigger_min_bytes", "gc_trigger_max_bytes", "young_bytes", "young_min_bytes",
      "young_survival_factor", "full_growth_ratio", "gc_growth_ratio", "tenure_full_marks",
      "min_cycle_interval_ms", "pacing_max_wait_ms", "pacing_give_up_cycles", "major_sweep",
      "mark_threads", "large_trigger_bytes", "large_map_bytes"};
  for (size_t k = 0; k < sizeof collected / sizeof collected[0]; k++) {
    i = hl_option_index(collected[k]);
    CHECK(i >= 0 && hl_option_info_get(i, &info) == HL_OK && info.collected_only == 1,
          "%s is not collected_only", collected[k]);
  }
  const char *const both[] = {"mode", "heap_limit_bytes", "page_release", "subpage_release",
      "verify", "page_size", "small_max", "reserve_bytes", "warm_pages", "tcache_blocks",
      "thp", "events_capacity", "release_advice"};
  for (size_t k = 0; k < sizeof both / sizeof both[0]; k++) {
    i = hl_option_index(both[k]);
    CHECK(i >= 0 && hl_option_info_get(i, &info) == HL_OK && info.collected_only == 0,
          "%s (a manual heap reads it) is collected_only", both[k]);
  }
  /* each collected-only variable, set to a value other than its default:
   * ignored on a manual heap, taken on a collected one; all of them at once
   * leave a manual heap possible */
  int ncollected = 0;
  for (i = 0; i < hl_option_count(); i++) {
    CHECK(hl_option_info_get(i, &info) == HL_OK, "info %d", i);
    if (!info.collected_only) continue;
    ncollected++;
    int64_t v = info.def != info.max ? info.max : info.min;
    char var[96], val[64];
    collected_var(i, var, val);
    /* alone on a collected heap (the ones set before put aside): applied --
     * or, a value a cross-check refuses beside the defaults (gc_trigger_bytes
     * above gc_trigger_max_bytes), refused naming it (h36opt: from_env asks
     * every cross-check of hl_options_validate) */
    for (int j = 0; j < i; j++) {
      char ovar[96], oval[64];
      if (collected_var(j, ovar, oval)) unsetenv(ovar);
    }
    setenv(var, val, 1);
    int64_t got = 0;
    hl_options_defaults(&o);
    int rc = hl_options_from_env(&o, err, sizeof err);
    char named[200];
    snprintf(named, sizeof named, "environment %s=%s: option ", var, val);
    CHECK(rc == HL_OK || (rc == HL_EVALUE && strncmp(err, named, strlen(named)) == 0),
          "%s=%s: %s", var, val, err);
    CHECK(rc || (hl_options_get(&o, info.name, &got) == HL_OK && got == v),
          "collected heap: %s=%s not applied (%" PRId64 ")", var, val, got);
    for (int j = 0; j < i; j++) {
      char ovar[96], oval[64];
      if (collected_var(j, ovar, oval)) setenv(ovar, oval, 1);
    }
    hl_options_defaults(&o);
    o.mode = HL_MODE_MANUAL;
    CHECK(hl_options_from_env(&o, err, sizeof err) == HL_OK, "manual %s=%s: %s", var, val, err);
    CHECK(hl_options_get(&o, info.name, &got) == HL_OK && got == info.def,
          "manual heap: %s=%s applied (%" PRId64 ")", var, val, got);
  }
  CHECK(ncollected >= 20, "%d collected-only options", ncollected);
  hl_options_defaults(&o);
  o.mode = HL_MODE_MANUAL;
  CHECK(hl_options_from_env(&o, err, sizeof err) == HL_OK, "manual, all at once: %s", err);
  CHECK(hl_heap_new(&o, &h, err, sizeof err) == HL_OK, "manual heap, all at once: %s", err);
  hl_heap_free(h);
  for (i = 0; i < hl_option_count(); i++) {
    hl_option_info_get(i, &info);
    char var[96];
    snprintf(var, sizeof var, "HEAPLAB_");
    for (const char *p = info.name; *p; p++) {
      size_t n = strlen(var);
      var[n] = (char)toupper((unsigned char)*p), var[n + 1] = 0;
    }
    if (info.collected_only) unsetenv(var);
  }

  /* the reviewer's repro: HEAPLAB_YOUNG_MIN_BYTES=64m and a manual heap */
  setenv("HEAPLAB_YOUNG_MIN_BYTES", "64m", 1);
  hl_options_defaults(&o);
  o.mode = HL_MODE_MANUAL;
  CHECK(hl_options_from_env(&o, err, sizeof err) == HL_OK, "%s", err);
  CHECK(hl_heap_new(&o, &h, err, sizeof err) == HL_OK, "YOUNG_MIN_BYTES=64m, manual: %s", err);
  hl_heap_free(h);
  setenv("HEAPLAB_MODE", "manual", 1);
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_OK, "YOUNG_MIN_BYTES=64m, MODE=manual: %s",
        err);
  hl_heap_free(h);
  unsetenv("HEAPLAB_MODE");
  /* a collected heap that is not generational has no nursery: not refused */
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_OK, "YOUNG_MIN_BYTES=64m, collected: %s",
        err);
  hl_heap_free(h);
  /* a generational one refuses it, naming the variable: it said "option
   * young_min_bytes: 8388608 exceeds young_bytes 1048576" of a value the
   * caller never gave (Heap(young_bytes='1m') under an exported
   * HEAPLAB_YOUNG_MIN_BYTES=8m) */
  setenv("HEAPLAB_YOUNG_MIN_BYTES", "8m", 1);
  hl_options_defaults(&o);
  o.generational = 1;
  o.young_bytes = 1 << 20;
  const char *const set[] = {"generational", "young_bytes"};
  CHECK(hl_options_from_env_except(&o, set, 2, err, sizeof err) == HL_EVALUE &&
            strcmp(err, "environment HEAPLAB_YOUNG_MIN_BYTES=8m: option young_min_bytes: "
                        "8388608 exceeds young_bytes 1048576; expected bytes in [65536, "
                        "young_bytes 1048576]") == 0,
        "generational, young_bytes=1m, HEAPLAB_YOUNG_MIN_BYTES=8m: '%s'", err);
  CHECK(o.young_min_bytes == 4 << 20, "opts changed by a refused environment");
  setenv("HEAPLAB_GENERATIONAL", "1", 1); /* the switch from the environment too */
  hl_options_defaults(&o);
  o.young_bytes = 1 << 20;
  CHECK(hl_options_from_env_except(&o, set + 1, 1, err, sizeof err) == HL_EVALUE &&
            strstr(err, "environment HEAPLAB_YOUNG_MIN_BYTES=8m: option young_min_bytes"),
        "HEAPLAB_GENERATIONAL=1: '%s'", err);
  unsetenv("HEAPLAB_GENERATIONAL");
  hl_options_defaults(&o); /* not generational: nothing to refuse */
  o.young_bytes = 1 << 20;
  CHECK(hl_options_from_env_except(&o, set + 1, 1, err, sizeof err) == HL_OK, "%s", err);
  CHECK(hl_options_validate(&o, err, sizeof err) == HL_OK, "not generational: %s", err);
  unsetenv("HEAPLAB_YOUNG_MIN_BYTES");
  /* a long value is shown as its first 60 bytes and its length, and the
   * reason follows whole (300 x's filled the message, session 37) */
  char longv[301];
  memset(longv, 'x', 300);
  longv[300] = 0;
  setenv("HEAPLAB_PAGE_SIZE", longv, 1);
  hl_options_defaults(&o);
  const char *want = "environment HEAPLAB_PAGE_SIZE=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
                     "... (300 bytes): option page_size: ";
  char big[1024];
  CHECK(hl_options_from_env(&o, big, sizeof big) == HL_EVALUE &&
            strncmp(big, want, strlen(want)) == 0 && strlen(big) < 400 &&
            strstr(big, "is not a byte size; expected bytes in [4096, 1048576]"),
        "HEAPLAB_PAGE_SIZE of 300 x's: '%s'", big);
  unsetenv("HEAPLAB_PAGE_SIZE");
  /* hl_env_var_kind: what heaplab reads, so a front-end refuses a typo (a
   * sweep's --set HEAPLAB_WARM_PAGE ran every cell at the default) */
  for (int i = 0; i < hl_option_count(); i++) {
    hl_option_info info;
    hl_option_info_get(i, &info);
    char var[96] = "HEAPLAB_";
    for (size_t k = 0; info.name[k]; k++) var[8 + k] = (char)toupper((unsigned char)info.name[k]);
    CHECK(hl_env_var_kind(var) == HL_ENV_OPTION, "%s is an option's variable", var);
  }
  static const struct {
    const char *var;
    int kind;
  } kinds[] = {{"HEAPLAB_STATS", HL_ENV_TOOL},          {"HEAPLAB_FAULT_RESTORE", HL_ENV_TOOL},
               {"HEAPLAB_E1_FILL_MIB", HL_ENV_TOOL},    {"HEAPLAB_X_MINE", HL_ENV_TOOL},
               {"HEAPLAB_ALLOCATOR", HL_ENV_TOOL},      {"HEAPLAB_WARM_PAGE", HL_ENV_NONE},
               {"HEAPLAB_Warm_Pages", HL_ENV_NONE},     {"HEAPLAB_warm_pages", HL_ENV_NONE},
               {"HEAPLAB_WARM_PAGESS", HL_ENV_NONE},    {"WARM_PAGES", HL_ENV_NONE},
               {"HEAPLAB_", HL_ENV_NONE},               {"", HL_ENV_NONE},
               {"HEAPLAB_STATSX", HL_ENV_NONE}};
  for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++)
    CHECK(hl_env_var_kind(kinds[k].var) == kinds[k].kind, "hl_env_var_kind(\"%s\") is %d, not %d",
          kinds[k].var, hl_env_var_kind(kinds[k].var), kinds[k].kind);
  CHECK(hl_env_var_kind(NULL) == HL_ENV_NONE, "NULL");
  return 0;
}
