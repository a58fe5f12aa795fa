/* Every option value is converted and checked by one function of the
 * library (hl_options_set_value) for every binding; the enum options'
 * choices are declared once (the HL_CHOICES_* lists make both the C
 * constants and the choices strings).  Checked here: each enum's constants
 * are the positions of its names, the type matrix (a number for an enum, a
 * boolean for a count, a string for anything), decimal-only numbers ("010"
 * is ten, not octal eight), no NUL smuggled into a string, the nearest
 * option suggested for a typo, an explicit value overriding a bad
 * environment value of the same option, and page_size's declared maximum
 * being the one the library's tables are sized by (HL_PAGE_SIZE_MAX). */
#include <unistd.h>

#include "check.h"
#include "internal.h"

/* What hl_options_from_env writes on stderr. */
static void env_warnings(char *buf, size_t len) {
  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  fflush(stderr);
  int saved = dup(2);
  dup2(fds[1], 2);
  hl_options o;
  hl_options_defaults(&o);
  char err[256];
  hl_options_from_env(&o, err, sizeof err);
  fflush(stderr);
  dup2(saved, 2);
  close(fds[1]);
  ssize_t n = read(fds[0], buf, len - 1);
  buf[n > 0 ? n : 0] = 0;
  close(fds[0]);
  close(saved);
}

static int set(hl_options *o, const char *name, int type, int64_t i, const char *s, char *err) {
  return hl_options_set_value(o, name, type, i, s, s ? strlen(s) : 0, err, 256);
}

static void expect(int rc, int code, const char *err, const char *needle, const char *what) {
  CHECK(rc == code, "%s: %s, expected %s (%s)", what, hl_error_name(rc), hl_error_name(code), err);
  CHECK(!needle || strstr(err, needle), "%s: message '%s' does not mention '%s'", what, err, needle);
}

int main(void) {
  /* the preload's allocation-bit free lists have a list per region size up
   * to a page of the largest page_size: a larger declared maximum indexed
   * past them (HEAPLAB_PAGE_SIZE=1m crashed every program before they were
   * sized by it) */
  hl_option_info ps;
  CHECK(hl_option_info_get(hl_option_index("page_size"), &ps) == HL_OK, "page_size declared");
  CHECK((uint64_t)ps.max == HL_PAGE_SIZE_MAX,
        "page_size's declared maximum %" PRId64 " is not HL_PAGE_SIZE_MAX %zu", ps.max,
        (size_t)HL_PAGE_SIZE_MAX);
  char e[256];
  hl_options big;
  hl_options_defaults(&big);
  big.page_size = (int64_t)HL_PAGE_SIZE_MAX * 2; /* set in the struct, past the setters */
  CHECK(hl_options_validate(&big, e, sizeof e) == HL_EVALUE && strstr(e, "page_size"),
        "page_size %" PRId64 " validated: '%s'", big.page_size, e);
  /* the enums and their names come from one list */
  struct { const char *opt, *name; int value; } consts[] = {
      {"mode", "manual", HL_MODE_MANUAL},       {"release_advice", "free", HL_ADVICE_FREE},
      {"fallback_advice", "none", HL_FALLBACK_NONE}, {"fallback_advice", "free", HL_FALLBACK_FREE},
      {"upgrade_budget_counts", "scanned", HL_BUDGET_SCANNED},
      {"reuse_failed_order", "lifo", HL_ORDER_LIFO}, {"sweep", "full", HL_SWEEP_FULL},
      {"major_sweep", "always", HL_MAJOR_ALWAYS}, {"collector", "background", HL_COLLECTOR_BACKGROUND},
  };
  for (size_t k = 0; k < sizeof consts / sizeof consts[0]; k++) {
    int i = hl_option_index(consts[k].opt);
    const char *name = hl_option_choice(i, consts[k].value);
    CHECK(name && strcmp(name, consts[k].name) == 0, "%s: constant %d is '%s', not '%s'",
          consts[k].opt, consts[k].value, name ? name : "(none)", consts[k].name);
  }
  for (int i = 0; i < hl_option_count(); i++) {
    hl_option_info info;
    hl_option_info_get(i, &info);
    if (info.kind != HL_OPT_ENUM) continue;
    /* the choices string is exactly the names min..max, comma-separated */
    char joined[200] = "";
    for (int64_t v = info.min; v <= info.max; v++)
      snprintf(joined + strlen(joined), sizeof joined - strlen(joined), "%s%s",
               v > info.min ? "," : "", hl_option_choice(i, v));
    CHECK(info.min == 0 && strcmp(joined, info.choices) == 0, "%s: choices '%s' but names '%s'",
          info.name, info.choices, joined);
    CHECK(hl_option_choice(i, info.max + 1) == NULL, "%s: a name past the last", info.name);
  }

  hl_options o;
  hl_options_defaults(&o);
  char err[256];
  expect(set(&o, "sweep", HL_VALUE_STRING, 0, "full", err), HL_OK, err, NULL, "sweep=full");
  CHECK(o.sweep == HL_SWEEP_FULL, "sweep");
  expect(set(&o, "sweep", HL_VALUE_INT, 1, NULL, err), HL_ETYPE, err, "retired|full as a string",
         "an integer for an enum");
  expect(set(&o, "warm_pages", HL_VALUE_BOOL, 1, NULL, err), HL_ETYPE, err, "got a boolean",
         "a boolean for a count");
  expect(set(&o, "page_release", HL_VALUE_INT, 2, NULL, err), HL_ETYPE, err, "the integer 2",
         "2 for a boolean");
  expect(set(&o, "page_release", HL_VALUE_INT, 0, NULL, err), HL_OK, err, NULL, "0 for a boolean");
  expect(set(&o, "warm_pages", HL_VALUE_OTHER, 0, "the number 1.5", err), HL_ETYPE, err,
         "got the number 1.5", "a float");
  expect(set(&o, "warm_pages", HL_VALUE_INT, -1, NULL, err), HL_EVALUE, err, "[0, 1048576]",
         "out of range");
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, "010", err), HL_OK, err, NULL, "'010'");
  CHECK(o.warm_pages == 10, "'010' is %lld, not ten (octal?)", (long long)o.warm_pages);
  /* padding is not part of the value: 64 written in 96 characters or more
   * (zeros or blanks) was "out of range", the message quoting the blanks */
  char padded[160];
  snprintf(padded, sizeof padded, "%096d", 64);
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, padded, err), HL_OK, err, NULL, "96 digits");
  CHECK(o.warm_pages == 64, "64 in 96 digits is %lld", (long long)o.warm_pages);
  snprintf(padded, sizeof padded, "%60s%s%60s", "", "128", "");
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, padded, err), HL_OK, err, NULL, "123 chars");
  CHECK(o.warm_pages == 128, "128 between blanks is %lld", (long long)o.warm_pages);
  snprintf(padded, sizeof padded, "%60s%s", "", "2000000");
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, padded, err), HL_EVALUE, err, "'2000000'",
         "out of range after blanks (the value quoted, not the blanks)");
  snprintf(padded, sizeof padded, "%0100d", 0);
  memset(padded + 50, '7', 50);   /* 50 zeros, then 50 sevens: out of range, not junk */
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, padded, err), HL_EVALUE, err, "out of range",
         "a 50-digit number");
  /* leading zeros go only before a digit: "00x10" is not the hex "0x10" */
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, "00x10", err), HL_EVALUE, err, "'00x10'",
         "'00x10'");
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, "0000", err), HL_OK, err, NULL, "'0000'");
  CHECK(o.warm_pages == 0, "'0000' is %lld", (long long)o.warm_pages);
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, "0x10", err), HL_OK, err, NULL, "'0x10'");
  CHECK(o.warm_pages == 16, "'0x10' is %lld", (long long)o.warm_pages);
  /* the grammar heaplab.h documents at hl_options_set, pinned (the C API
   * hunt, session 33, asked which forms are meant) */
  static const struct { const char *v; int64_t want; } forms[] = {
      {"+5", 5}, {" 5", 5}, {"5 ", 5}, {"\t5\n", 5}, {"010", 10}, {"0X1f", 31}, {"-0", 0}};
  for (size_t k = 0; k < sizeof forms / sizeof forms[0]; k++) {
    expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, forms[k].v, err), HL_OK, err, NULL, forms[k].v);
    CHECK(o.warm_pages == forms[k].want, "'%s' is %lld", forms[k].v, (long long)o.warm_pages);
  }
  static const char *not_forms[] = {"1e3", "1.5", "6 4", "1_000", "+ 5", "0x", "5k"};
  for (size_t k = 0; k < sizeof not_forms / sizeof not_forms[0]; k++)
    expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, not_forms[k], err), HL_EVALUE, err,
           "is not a whole number", not_forms[k]);
  expect(set(&o, "reserve_bytes", HL_VALUE_STRING, 0, "64MiB", err), HL_OK, err, NULL, "64MiB");
  CHECK(o.reserve_bytes == (int64_t)64 << 20, "64MiB");
  expect(set(&o, "reserve_bytes", HL_VALUE_STRING, 0, "2g", err), HL_OK, err, NULL, "2g");
  CHECK(o.reserve_bytes == (int64_t)2 << 30, "2g");
  expect(hl_options_set_value(&o, "reserve_bytes", HL_VALUE_STRING, 0, "16\0junk", 7, err, 256),
         HL_EVALUE, err, "NUL", "a NUL inside the value");
  expect(hl_options_set_value(&o, "sweep", HL_VALUE_STRING, 0, "full\0", 5, err, 256), HL_EVALUE,
         err, "NUL", "a trailing NUL");
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, "7 pages", err), HL_EVALUE, err, "'7 pages'",
         "junk after a number");
  expect(set(&o, "warm_page", HL_VALUE_INT, 1, NULL, err), HL_EOPTION, err,
         "did you mean 'warm_pages'", "a typo");
  expect(set(&o, "zzzzzzzz", HL_VALUE_INT, 1, NULL, err), HL_EOPTION, err, "unknown option",
         "no near name");
  CHECK(!strstr(err, "did you mean"), "suggested something for zzzzzzzz: %s", err);

  /* a string that is no value at all says so, for every kind of option;
   * only a well-formed number is "out of range" (the hostile Lua run:
   * HEAPLAB_WARM_PAGES=abc said "'abc' is out of range") */
  struct { const char *opt, *value, *says; } junk[] = {
      {"warm_pages", "abc", "'abc' is not a whole number"},
      {"warm_pages", "12x", "'12x' is not a whole number"},
      {"warm_pages", "1.5", "'1.5' is not a whole number"},
      {"warm_pages", "-", "'-' is not a whole number"},
      {"warm_pages", "0x", "'0x' is not a whole number"},
      {"warm_pages", "", "the value is empty"},
      {"warm_pages", "  ", "the value is empty"},
      {"warm_pages", "99999999999999999999999", "'99999999999999999999999' is out of range"},
      {"warm_pages", "-5", "'-5' is out of range"},
      {"gc_live_ratio", "lots", "'lots' is not a whole number"},
      {"gc_live_ratio", "1001", "'1001' is out of range"},
      {"quiet_bytes", "64q", "'64q' is not a byte size"},
      {"quiet_bytes", "1.5m", "'1.5m' is not a byte size"},
      {"quiet_bytes", "m", "'m' is not a byte size"},
      {"quiet_bytes", "", "the value is empty"},
      {"quiet_bytes", "99999999999999999999999", "is out of range"},
      {"quiet_bytes", "9999999999t", "'9999999999t' is out of range"},
      {"verify", "maybe", "'maybe' is not a boolean"},
      {"verify", "", "the value is empty"},
      {"sweep", "partial", "'partial' is not one of retired|full"},
      {"sweep", "", "the value is empty"},
  };
  for (size_t k = 0; k < sizeof junk / sizeof junk[0]; k++) {
    char what[160];
    snprintf(what, sizeof what, "%s='%s'", junk[k].opt, junk[k].value);
    expect(set(&o, junk[k].opt, HL_VALUE_STRING, 0, junk[k].value, err), HL_EVALUE, err,
           junk[k].says, what);
    CHECK(strstr(junk[k].says, "out of range") || !strstr(err, "out of range"),
          "%s: '%s' calls junk out of range", what, err);
  }
  /* too long to convert: digits are a number out of range, else junk */
  char longv[200];
  memset(longv, '9', sizeof longv - 1);
  longv[sizeof longv - 1] = 0;
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, longv, err), HL_EVALUE, err, "is out of range",
         "200 nines");
  memset(longv, 'x', sizeof longv - 1);
  expect(set(&o, "warm_pages", HL_VALUE_STRING, 0, longv, err), HL_EVALUE, err,
         "is not a whole number", "200 x's");

  /* an explicit value overrides the environment, even a bad one */
  setenv("HEAPLAB_WARM_PAGES", "lots", 1);
  hl_options_defaults(&o);
  expect(hl_options_from_env(&o, err, sizeof err), HL_EVALUE, err, "HEAPLAB_WARM_PAGES",
         "a bad environment value");
  const char *skip[] = {"warm_pages"};
  expect(hl_options_from_env_except(&o, skip, 1, err, sizeof err), HL_OK, err, NULL,
         "skipping the option set explicitly");
  unsetenv("HEAPLAB_WARM_PAGES");

  /* fault specs: strict */
  /* ("always:5:6" is N 5, errno 6 since session 25: options_from_environment) */
  const char *bad_specs[] = {"first:12abc", "always:5:0", "always:5:6:7", "first:EIO:EAGAIN",
                             "nope"};
  for (size_t k = 0; k < sizeof bad_specs / sizeof bad_specs[0]; k++) {
    setenv("HEAPLAB_FAULT_RELEASE", bad_specs[k], 1);
    hl_heap *h = NULL;
    int rc = hl_heap_new(NULL, &h, err, sizeof err);
    CHECK(rc == HL_EVALUE && !h && strstr(err, "HEAPLAB_FAULT_RELEASE"),
          "fault spec '%s' accepted (%s)", bad_specs[k], err);
  }
  /* a number past int64 is out of range, not "not a decimal number" (the
   * C API hunt, session 33); junk after digits is still no number */
  /* and the range is its mode's (hl_inject's), not int64_t's: every:-1e20
   * was told N is in [-9223372036854775808, ...] (session 43) */
  const char *ranges[][2] = {
      {"sticky:99999999999999999999",
       "HEAPLAB_FAULT_RELEASE=sticky:99999999999999999999: N '99999999999999999999' is out of "
       "range [0, 9223372036854775807]"},
      {"first:-99999999999999999999",
       "N '-99999999999999999999' is out of range [0, 9223372036854775807]"},
      {"every:99999999999999999999",
       "HEAPLAB_FAULT_RELEASE=every:99999999999999999999: N '99999999999999999999' is out of "
       "range [1, 9223372036854775807]"},
      {"every:-99999999999999999999:EIO",
       "N '-99999999999999999999' is out of range [1, 9223372036854775807]"},
      {"always:99999999999999999999",
       "N '99999999999999999999' is out of range [-9223372036854775808, 9223372036854775807]"},
      {"sometimes:99999999999999999999", "unknown mode 'sometimes'"},
      {"first:12abc", "N '12abc' is not a decimal number"}};
  for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
    setenv("HEAPLAB_FAULT_RELEASE", ranges[k][0], 1);
    hl_heap *h = NULL;
    int rc = hl_heap_new(NULL, &h, err, sizeof err);
    CHECK(rc == HL_EVALUE && !h && strstr(err, ranges[k][1]), "fault spec '%s': %s", ranges[k][0],
          err);
  }
  hl_heap *h = NULL;
  /* a spec longer than the parser's 127 bytes is refused, naming the
   * variable -- not cut to its first 127 bytes: "first:" and 130 zeros
   * before the 2 were "first:0", a schedule that never fires (no test set a
   * long one: make coverage, session 43) */
  char longspec[160] = "first:";
  memset(longspec + 6, '0', 130);
  strcpy(longspec + 136, "2");
  setenv("HEAPLAB_FAULT_RELEASE", longspec, 1);
  h = NULL;
  int lrc = hl_heap_new(NULL, &h, err, sizeof err);
  CHECK(lrc == HL_EVALUE && !h &&
            strstr(err, "environment HEAPLAB_FAULT_RELEASE: the value is too long"),
        "a %zu-byte fault spec: %s, '%s'", strlen(longspec), hl_error_name(lrc), err);
  unsetenv("HEAPLAB_FAULT_RELEASE");
  setenv("HEAPLAB_FAULT_RELAESE", "always", 1);
  h = NULL;
  CHECK(hl_heap_new(NULL, &h, err, sizeof err) == HL_EVALUE && strstr(err, "unknown site 'relaese'"),
        "a fault variable naming no site: %s", err);
  unsetenv("HEAPLAB_FAULT_RELAESE");
  /* a HEAPLAB_ variable that is no option: one warning naming the nearest,
   * once per process; the variables of heaplab's own tools are left alone */
  setenv("HEAPLAB_warm_pages", "3", 1);
  setenv("HEAPLAB_RESULTS", "/tmp", 1);
  setenv("HEAPLAB_E1_FILL_MIB", "8", 1);
  char warn[1024];
  env_warnings(warn, sizeof warn);
  CHECK(strstr(warn, "HEAPLAB_warm_pages is not an option; did you mean HEAPLAB_WARM_PAGES?"),
        "warning: '%s'", warn);
  CHECK(!strstr(warn, "RESULTS") && !strstr(warn, "E1_FILL"), "tool variables warned: %s", warn);
  env_warnings(warn, sizeof warn);
  CHECK(warn[0] == 0, "warned twice: %s", warn);
  unsetenv("HEAPLAB_warm_pages");

  /* the trigger must lie between its bounds */
  hl_options_defaults(&o);
  expect(set(&o, "gc_trigger_bytes", HL_VALUE_STRING, 0, "1m", err), HL_OK, err, NULL, "1m");
  expect(hl_options_validate(&o, err, sizeof err), HL_EVALUE, err, "gc_trigger_min_bytes",
         "a trigger below its minimum");
  puts("ok");
  return 0;
}
