/*
 * fuzz_options.c -- libFuzzer target for the parsers of what a user types:
 * option values (hl_options_set_value, hl_options_set), HEAPLAB_<NAME>
 * environment overrides (hl_options_from_env_except, through setenv), fault
 * schedules by name (hl_inject_named) and HEAPLAB_FAULT_<SITE> specs (read
 * by hl_heap_new(NULL, ...)).
 *
 * The first byte picks the parser; the rest are its arguments, names drawn
 * from the real tables or made of the input's bytes.  Properties:
 *   - nothing crashes (ASan + UBSan);
 *   - every rejection has an error message naming the option, the variable,
 *     the site, the mode or the errno that was wrong, and leaves the options
 *     struct as it was;
 *   - every acceptance round-trips: the value accepted, written back in its
 *     canonical form (decimal, a choice's name, true/false; a fault state as
 *     mode:N:ERRNO), is accepted again and gives the same value, which lies
 *     in the option's range; an accepted fault schedule is the one armed.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heaplab.h"
#include "internal.h" /* (hl__options_refused_by) */

#define FUZZ_NAME "fuzz_options"
#include "fuzz_input.h"


static int64_t i64(input *in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v = v << 8 | u8(in);
  switch (v & 3) { /* small numbers and the edges more often than chance */
  case 0: return (int64_t)(v >> 2) % 4096 - 16;
  case 1: return (int64_t)v;
  default: return (int64_t)(v >> 24);
  }
}

/* Up to max bytes of the input (NUL bytes allowed when nul); returns length. */
static size_t bytes(input *in, char *buf, size_t max, bool nul) {
  size_t n = u8(in) % (max + 1), k = 0;
  for (size_t i = 0; i < n && in->n; i++) {
    char c = (char)u8(in);
    if (c || nul) buf[k++] = c;
  }
  buf[k] = 0;
  return k;
}

/* An option name: one of the table (most often), or bytes. */
static const char *option_name(input *in, char *buf, size_t max) {
  uint8_t k = u8(in);
  if (k < 0xe0) {
    hl_option_info info;
    hl_option_info_get(k % hl_option_count(), &info);
    return info.name;
  }
  bytes(in, buf, max, false);
  return buf;
}

/* The canonical string of option i's value v. */
static void canonical(const hl_option_info *info, int index, int64_t v, char *buf, size_t len) {
  if (info->kind == HL_OPT_ENUM) {
    const char *c = hl_option_choice(index, v);
    if (!c) FAIL("option %s holds %" PRId64 ", which is not a choice", info->name, v);
    snprintf(buf, len, "%s", c);
  } else if (info->kind == HL_OPT_BOOL) {
    snprintf(buf, len, "%s", v ? "true" : "false");
  } else {
    snprintf(buf, len, "%" PRId64, v);
  }
}

/* An accepted value: in range, and its canonical forms give it back. */
static void round_trip(const char *name, int64_t v) {
  int i = hl_option_index(name);
  if (i < 0) FAIL("an unknown option '%s' was accepted", name);
  hl_option_info info;
  hl_option_info_get(i, &info);
  if (v < info.min || v > info.max)
    FAIL("option %s accepted %" PRId64 ", outside [%" PRId64 ", %" PRId64 "]", name, v, info.min,
         info.max);
  char s[64], err[256];
  canonical(&info, i, v, s, sizeof s);
  hl_options o;
  hl_options_defaults(&o);
  int64_t back = -12345;
  if (hl_options_set(&o, name, s, err, sizeof err) || hl_options_get(&o, name, &back) || back != v)
    FAIL("option %s: %" PRId64 " written as '%s' does not come back (%" PRId64 ", '%s')", name, v,
         s, back, err);
  if (info.kind == HL_OPT_BYTES && v > 0 && v % 1024 == 0) {
    snprintf(s, sizeof s, "%" PRId64 "k", v / 1024);
    if (hl_options_set(&o, name, s, err, sizeof err) || hl_options_get(&o, name, &back) ||
        back != v)
      FAIL("option %s: '%s' is not %" PRId64 " ('%s')", name, s, v, err);
  }
  if (hl_options_set_int(&o, name, v, err, sizeof err) || hl_options_get(&o, name, &back) ||
      back != v)
    FAIL("option %s: set_int(%" PRId64 ") refused: %s", name, v, err);
}

/* A refused value: a message that names the option, nothing changed. */
static void refused(int rc, const char *name, const char *err, const hl_options *before,
                    const hl_options *after, const char *what) {
  if (rc < 0 || rc >= HL_ERROR_COUNT) FAIL("%s: error code %d", what, rc);
  if (!err[0])
    FAIL("%s of option '%s' refused (%s) with no message", what, name, hl_error_name(rc));
  if (hl_option_index(name) >= 0) {
    if (!strstr(err, name)) FAIL("%s: the message '%s' does not name option %s", what, err, name);
  } else {
    if (rc != HL_EOPTION || !strstr(err, "unknown option"))
      FAIL("%s of the unknown option '%s': %s '%s'", what, name, hl_error_name(rc), err);
    if (strlen(name) < 100 && !strstr(err, name))
      FAIL("%s: the message '%s' does not repeat the unknown name '%s'", what, err, name);
  }
  if (memcmp(before, after, sizeof *before))
    FAIL("%s of '%s' was refused but changed the options", what, name);
}

static void fuzz_set_value(input *in, bool cstring) {
  char nbuf[80], sval[100], err[512] = "";
  const char *name = option_name(in, nbuf, 64);
  int type = u8(in) % 4;
  int64_t ival = i64(in);
  size_t slen = bytes(in, sval, 90, !cstring);
  hl_options before, o;
  hl_options_defaults(&before);
  o = before;
  int rc = cstring ? hl_options_set(&o, name, sval, err, sizeof err)
                   : hl_options_set_value(&o, name, type, ival, sval, slen, err, sizeof err);
  if (cstring) type = HL_VALUE_STRING;
  if (rc) {
    refused(rc, name, err, &before, &o, cstring ? "hl_options_set" : "hl_options_set_value");
    return;
  }
  int i = hl_option_index(name);
  if (i < 0) FAIL("an unknown option '%s' was accepted", name);
  hl_option_info info;
  hl_option_info_get(i, &info);
  if (type == HL_VALUE_OTHER) FAIL("option %s accepted a value of another type", name);
  if (type == HL_VALUE_BOOL && info.kind != HL_OPT_BOOL) FAIL("option %s accepted a boolean", name);
  if (type == HL_VALUE_INT && info.kind == HL_OPT_ENUM) FAIL("option %s accepted an integer", name);
  if (type == HL_VALUE_STRING && memchr(sval, 0, slen))
    FAIL("option %s accepted a value with a NUL byte", name);
  int64_t v;
  hl_options_get(&o, name, &v);
  if (type == HL_VALUE_INT && v != ival)
    FAIL("option %s: integer %" PRId64 " became %" PRId64, name, ival, v);
  /* only that option changed */
  int64_t keep;
  hl_options_get(&before, name, &keep);
  hl_options_set_int(&before, name, v, err, sizeof err);
  if (memcmp(&before, &o, sizeof o)) FAIL("setting option %s changed another option", name);
  round_trip(name, v);
}

/* HEAPLAB_<NAME> for option name. */
static void env_var(const char *name, char *var, size_t len) {
  size_t n = (size_t)snprintf(var, len, "HEAPLAB_");
  for (const char *p = name; *p && n + 1 < len; p++)
    var[n++] = (char)(*p >= 'a' && *p <= 'z' ? *p - 32 : *p);
  var[n] = 0;
}

static void fuzz_env(input *in) {
  enum { N = 3 };
  const char *names[N];
  char vals[N][64], vars[N][96], err[512] = "";
  int n = 1 + u8(in) % N;
  for (int k = 0; k < n; k++) {
    hl_option_info info;
    hl_option_info_get(u8(in) % hl_option_count(), &info);
    names[k] = info.name;
    bytes(in, vals[k], 60, false);
    env_var(names[k], vars[k], sizeof vars[k]);
    setenv(vars[k], vals[k], 1);
  }
  const char *skip[N];
  size_t nskip = 0;
  uint8_t mask = u8(in);
  for (int k = 0; k < n; k++)
    if (mask >> k & 1) skip[nskip++] = names[k];
  hl_options o, defaults;
  hl_options_defaults(&o);
  defaults = o;
  int rc = hl_options_from_env_except(&o, skip, nskip, err, sizeof err);
  /* what each variable gives alone (the last setenv of a name wins) */
  bool any_bad = false;
  for (int k = 0; k < n; k++) {
    bool skipped = false, later = false;
    for (size_t s = 0; s < nskip; s++) skipped |= strcmp(skip[s], names[k]) == 0;
    for (int j = k + 1; j < n; j++) later |= strcmp(names[j], names[k]) == 0;
    int64_t got, want, def;
    hl_options_get(&o, names[k], &got);
    hl_options_get(&defaults, names[k], &def);
    if (skipped) {
      if (got != def)
        FAIL("option %s was skipped but %s=%s changed it", names[k], vars[k], vals[k]);
      continue;
    }
    if (later) continue;
    hl_options alone = defaults;
    char e2[256];
    int rc2 = hl_options_set(&alone, names[k], vals[k], e2, sizeof e2);
    hl_options_get(&alone, names[k], &want);
    if (rc2) {
      any_bad = true;
      if (!rc) FAIL("%s=%s was accepted from the environment, refused by hl_options_set: %s",
                    vars[k], vals[k], e2);
    } else if (!rc && got != want) {
      FAIL("%s=%s gave %" PRId64 ", hl_options_set gives %" PRId64, vars[k], vals[k], got, want);
    }
  }
  if (rc && !any_bad) {
    /* every value good alone: only a cross-check between them may refuse
     * them together (small_max above page_size/4, young_min_bytes above
     * young_bytes ...), one hl_options_validate refuses too -- and the
     * refusal is true: the message of one of its cross-checks that refuses
     * these values, asked of options.c's table (hl__options_refused_by: not
     * its conditions stated again here by message prefix, which a check
     * from_env names and this file did not know made a false failure -- the
     * fresh-clone CI of 18980e6).  Not necessarily validate's first: from_env
     * passes over a check the environment is not to blame for (a small_max
     * the caller left to the call) to the next. */
    hl_options all = defaults;
    char e3[256];
    for (int k = 0; k < n; k++) {
      bool skipped = false;
      for (size_t s = 0; s < nskip; s++) skipped |= strcmp(skip[s], names[k]) == 0;
      if (!skipped) (void)hl_options_set(&all, names[k], vals[k], e3, sizeof e3);
    }
    if (hl_options_validate(&all, e3, sizeof e3) == HL_OK)
      FAIL("the environment was refused with every value good: %s", err);
    if (hl__options_refused_by(&all, err) < 0)
      FAIL("the environment was refused ('%s'), by no cross-check that refuses these values "
           "(hl_options_validate: '%s')", err, e3);
  }
  if (rc) {
    bool named = false;
    for (int k = 0; k < n; k++) named |= strstr(err, vars[k]) != NULL;
    if (!named) FAIL("the message '%s' names none of the variables set", err);
  }
  for (int k = 0; k < n; k++) unsetenv(vars[k]);
}

static hl_heap *H; /* for hl_inject_named */

static void check_armed(hl_heap *h, int site, int mode, int64_t arg, int err, const char *what) {
  hl_fault_state fs[HL_SITE_COUNT];
  size_t n = 0;
  if (hl_faults_get(h, fs, HL_SITE_COUNT, &n) || n != HL_SITE_COUNT) FAIL("faults_get");
  hl_fault_state *f = &fs[site];
  if (f->mode != mode || (mode != HL_FAULT_off && (f->arg != arg || f->err != err)))
    FAIL("%s: site %s armed %s:%" PRId64 ":%d, expected %s:%" PRId64 ":%d", what,
         hl_fault_site_name(site), hl_fault_mode_name(f->mode), f->arg, f->err,
         hl_fault_mode_name(mode), arg, err);
}

/* A name from a list (most often), or bytes. */
static const char *token(input *in, const char *(*name)(int), int count, char *buf, size_t max) {
  uint8_t k = u8(in);
  if (k < 0xc0) return name(k % count);
  if (k == 0xff) return NULL;
  bytes(in, buf, max, false);
  return buf;
}

static const char *errno_token(input *in, char *buf, size_t max) {
  uint8_t k = u8(in);
  static const char *names[] = {"ENOMEM", "EAGAIN", "EIO", "EINVAL", "EPERM", "11", "4095",
                                "0", "-5", "4096", "eagain", "EAGAIN "};
  if (k < 0xa0) return names[k % (sizeof names / sizeof names[0])];
  if (k == 0xff) return NULL;
  bytes(in, buf, max, false);
  return buf;
}

static void fuzz_inject_named(input *in) {
  char sb[64], mb[64], eb[64];
  const char *site = token(in, hl_fault_site_name, HL_SITE_COUNT, sb, 40);
  const char *mode = token(in, hl_fault_mode_name, HL_FAULT_MODE_COUNT, mb, 40);
  int64_t arg = i64(in);
  const char *err = errno_token(in, eb, 40);
  int rc = hl_inject_named(H, site, mode, arg, err);
  const char *m = hl_heap_error(H);
  int s = site ? hl_fault_site_index(site) : -1, md = mode ? hl_fault_mode_index(mode) : -1;
  if (rc) {
    if (rc != HL_EINVAL || !m[0]) FAIL("inject_named: %s with message '%s'", hl_error_name(rc), m);
    const char *what = s < 0 ? site : md < 0 ? mode : NULL;
    if (what && strlen(what) < 40 && !strstr(m, what))
      FAIL("inject_named: '%s' does not name the wrong word '%s'", m, what);
    if (s < 0 && !strstr(m, "site")) FAIL("inject_named: unknown site, message '%s'", m);
    if (s >= 0 && md < 0 && !strstr(m, "mode")) FAIL("inject_named: unknown mode, message '%s'", m);
    if (s >= 0 && md >= 0 && !strstr(m, "errno") && !strstr(m, "needs N"))
      FAIL("inject_named(%s, %s, %" PRId64 ", %s): message '%s' says neither errno nor N", site,
           mode, arg, err ? err : "NULL", m);
    return;
  }
  if (s < 0 || md < 0) FAIL("inject_named accepted site '%s' mode '%s'", site, mode);
  int e = ENOMEM;
  if (err) {
    char *end;
    long long v = strtoll(err, &end, 10);
    e = end != err && !*end ? (int)v : hl_errno_index(err);
  }
  check_armed(H, s, md, arg, e, "inject_named");
  if (hl_inject(H, s, HL_FAULT_off, 0, 0)) FAIL("disarm");
}

/* HEAPLAB_FAULT_<SITE>=spec, read by hl_heap_new(NULL, ...). */
static void fuzz_fault_env(input *in) {
  char sb[64], spec[80], var[128], err[512] = "";
  const char *site = token(in, hl_fault_site_name, HL_SITE_COUNT, sb, 40);
  if (!site || !site[0]) site = "release";
  int n = snprintf(var, sizeof var, "HEAPLAB_FAULT_");
  for (const char *p = site; *p && n < 120; p++) {
    char c = *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
    if (c == '=') c = '_';
    var[n++] = c;
  }
  var[n] = 0;
  if (u8(in) & 1) {
    /* a well-formed spec, fuzzed in its parts */
    char mb[32], eb[32];
    const char *mode = token(in, hl_fault_mode_name, HL_FAULT_MODE_COUNT, mb, 12);
    const char *e = errno_token(in, eb, 12);
    int64_t a = i64(in);
    switch (u8(in) % 4) {
    case 0: snprintf(spec, sizeof spec, "%s", mode ? mode : ""); break;
    case 1: snprintf(spec, sizeof spec, "%s:%" PRId64, mode ? mode : "", a); break;
    case 2: snprintf(spec, sizeof spec, "%s:%s", mode ? mode : "", e ? e : ""); break;
    default: snprintf(spec, sizeof spec, "%s:%" PRId64 ":%s", mode ? mode : "", a, e ? e : "");
    }
  } else {
    bytes(in, spec, 70, false);
  }
  setenv(var, spec, 1);
  hl_heap *h = NULL;
  int rc = hl_heap_new(NULL, &h, err, sizeof err);
  int s = hl_fault_site_index(site);
  char lower[64];
  size_t k = 0;
  for (const char *p = var + 14; *p && k < sizeof lower - 1; p++)
    lower[k++] = (char)(*p >= 'A' && *p <= 'Z' ? *p + 32 : *p);
  lower[k] = 0;
  s = hl_fault_site_index(lower);
  if (rc) {
    if (h) FAIL("hl_heap_new failed but gave a heap");
    if (!err[0]) FAIL("%s=%s: refused with no message", var, spec);
    if (rc == HL_EVALUE) {
      if (!strstr(err, var))
        FAIL("%s=%s: the message '%s' does not name the variable", var, spec, err);
    } else if (!(s == HL_SITE_reserve || s == HL_SITE_any)) {
      FAIL("%s=%s: hl_heap_new: %s '%s'", var, spec, hl_error_name(rc), err);
    }
  } else {
    if (s < 0 && spec[0]) FAIL("%s=%s: an unknown site was accepted", var, spec);
    if (s >= 0 && spec[0]) {
      hl_fault_state fs[HL_SITE_COUNT];
      size_t cnt;
      hl_faults_get(h, fs, HL_SITE_COUNT, &cnt);
      hl_fault_state st = fs[s];
      /* the mode armed is the spec's first field */
      char first[80];
      snprintf(first, sizeof first, "%s", spec);
      char *colon = strchr(first, ':');
      if (colon) *colon = 0;
      if (st.mode != hl_fault_mode_index(first))
        FAIL("%s=%s armed mode %s", var, spec, hl_fault_mode_name(st.mode));
      /* round trip: the state written back as a spec arms the same.  Every
       * errno has a name that reads back (hl_errno_name's "E<n>" for a
       * number without a symbolic one). */
      const char *en = hl_errno_name(st.err);
      {
        char again[96];
        snprintf(again, sizeof again, "%s:%" PRId64 ":%s", hl_fault_mode_name(st.mode), st.arg, en);
        if (st.mode == HL_FAULT_off) snprintf(again, sizeof again, "off");
        hl_heap_free(h);
        h = NULL;
        setenv(var, again, 1);
        rc = hl_heap_new(NULL, &h, err, sizeof err);
        if (rc && !(s == HL_SITE_reserve || s == HL_SITE_any))
          FAIL("%s=%s (from %s) refused: %s", var, again, spec, err);
        if (!rc) check_armed(h, s, st.mode, st.arg, st.err, again);
      }
    }
  }
  hl_heap_free(h);
  unsetenv(var);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc, (void)argv;
  /* no HEAPLAB_ variable of the caller's may steer the properties */
  extern char **environ;
  for (int again = 1; again;) {
    again = 0;
    for (char **e = environ; *e; e++)
      if (!strncmp(*e, "HEAPLAB_", 8)) {
        char name[256];
        size_t n = strcspn(*e, "=");
        snprintf(name, sizeof name, "%.*s", (int)n, *e);
        unsetenv(name);
        again = 1;
        break;
      }
  }
  hl_options o;
  hl_options_defaults(&o);
  o.reserve_bytes = 1 << 20;
  o.events_capacity = 16;
  char err[256];
  if (hl_heap_new(&o, &H, err, sizeof err)) FAIL("heap: %s", err);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input in = {data, size};
  switch (u8(&in) % 5) {
  case 0: fuzz_set_value(&in, false); break;
  case 1: fuzz_set_value(&in, true); break;
  case 2: fuzz_env(&in); break;
  case 3: fuzz_inject_named(&in); break;
  default:
    /* a small reservation: a heap per input */
    setenv("HEAPLAB_RESERVE_BYTES", "1m", 1);
    setenv("HEAPLAB_EVENTS_CAPACITY", "16", 1);
    fuzz_fault_env(&in);
    unsetenv("HEAPLAB_RESERVE_BYTES");
    unsetenv("HEAPLAB_EVENTS_CAPACITY");
  }
  /* no crash on the helpers either */
  char nb[64];
  bytes(&in, nb, 60, false);
  (void)hl_option_nearest(nb);
  (void)hl_fault_site_index(nb);
  (void)hl_errno_index(nb);
  return 0;
}
