/*
 * options.c -- the options table, generated from HL_OPTIONS in heaplab.h.
 * Parsing, validation and the HEAPLAB_<NAME> environment overrides.  A bad
 * value is an error naming the option and the allowed range.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../internal.h"

static const hl_option_info table[] = {
#define ROW(name, kind, def, lo, hi, choices, desc)                            \
  {#name, HL_OPT_##kind, (int64_t)(def), (int64_t)(lo), (int64_t)(hi), choices, desc},
    HL_OPTIONS(ROW)
#undef ROW
};
#define NOPT ((int)(sizeof table / sizeof table[0]))

static const size_t offsets[] = {
#define OFF(name, kind, def, lo, hi, choices, desc) offsetof(hl_options, name),
    HL_OPTIONS(OFF)
#undef OFF
};

int hl_option_count(void) { return NOPT; }

int hl_option_info_get(int index, hl_option_info *out) {
  if (index < 0 || index >= NOPT || !out) return HL_ERANGE;
  *out = table[index];
  return HL_OK;
}

int hl_option_index(const char *name) {
  if (!name) return -1;
  for (int i = 0; i < NOPT; i++)
    if (strcmp(table[i].name, name) == 0) return i;
  return -1;
}

void hl_options_defaults(hl_options *opts) {
  for (int i = 0; i < NOPT; i++)
    *(int64_t *)((char *)opts + offsets[i]) = table[i].def;
}

/* The i-th choice of an enum option, or NULL. */
static const char *choice(int index, int64_t value, char *buf, size_t len) {
  const char *c = table[index].choices;
  for (int64_t k = 0; c && *c; k++) {
    const char *end = strchr(c, ',');
    size_t n = end ? (size_t)(end - c) : strlen(c);
    if (k == value) {
      if (n >= len) n = len - 1;
      memcpy(buf, c, n);
      buf[n] = 0;
      return buf;
    }
    if (!end) break;
    c = end + 1;
  }
  return NULL;
}

static void describe_range(int i, char *buf, size_t len) {
  const hl_option_info *o = &table[i];
  switch (o->kind) {
  case HL_OPT_BOOL: snprintf(buf, len, "a boolean (true/false, 1/0, on/off)"); break;
  case HL_OPT_ENUM: {
    char tmp[160];
    snprintf(tmp, sizeof tmp, "%s", o->choices);
    for (char *p = tmp; *p; p++)
      if (*p == ',') *p = '|';
    snprintf(buf, len, "one of %s", tmp);
    break;
  }
  case HL_OPT_BYTES:
    snprintf(buf, len, "bytes in [%" PRId64 ", %" PRId64 "] (suffixes k, m, g, t)", o->min, o->max);
    break;
  default: snprintf(buf, len, "an integer in [%" PRId64 ", %" PRId64 "]", o->min, o->max);
  }
}

static int range_error(int i, const char *shown, char *err, size_t errlen) {
  char range[200];
  describe_range(i, range, sizeof range);
  hl__fmt_err(err, errlen, "option %s: %s is out of range; expected %s", table[i].name,
              shown, range);
  return HL_EVALUE;
}

static int check_value(int i, int64_t v, char *err, size_t errlen) {
  const hl_option_info *o = &table[i];
  if (v < o->min || v > o->max) {
    char shown[32];
    snprintf(shown, sizeof shown, "%" PRId64, v);
    return range_error(i, shown, err, errlen);
  }
  return HL_OK;
}

int hl_options_set_int(hl_options *opts, const char *name, int64_t value, char *err,
                       size_t errlen) {
  int i = hl_option_index(name);
  if (!opts) {
    hl__fmt_err(err, errlen, "options: NULL options struct");
    return HL_EINVAL;
  }
  if (i < 0) {
    hl__fmt_err(err, errlen, "unknown option '%s'", name ? name : "(null)");
    return HL_EOPTION;
  }
  int rc = check_value(i, value, err, errlen);
  if (rc) return rc;
  *(int64_t *)((char *)opts + offsets[i]) = value;
  return HL_OK;
}

/* Parse a value string for option i. */
static int parse(int i, const char *s, int64_t *out, char *err, size_t errlen) {
  const hl_option_info *o = &table[i];
  while (isspace((unsigned char)*s)) s++;
  if (o->kind == HL_OPT_BOOL) {
    static const char *yes[] = {"1", "true", "on", "yes"};
    static const char *no[] = {"0", "false", "off", "no"};
    for (int k = 0; k < 4; k++) {
      if (strcasecmp(s, yes[k]) == 0) return *out = 1, HL_OK;
      if (strcasecmp(s, no[k]) == 0) return *out = 0, HL_OK;
    }
    return range_error(i, s, err, errlen);
  }
  if (o->kind == HL_OPT_ENUM) {
    char buf[64];
    for (int64_t k = 0; choice(i, k, buf, sizeof buf); k++)
      if (strcasecmp(buf, s) == 0) return *out = k, HL_OK;
    return range_error(i, s, err, errlen);
  }
  errno = 0;
  char *end = NULL;
  long long v = strtoll(s, &end, 0);
  if (end == s || errno == ERANGE) return range_error(i, s, err, errlen);
  int64_t mult = 1;
  if (o->kind == HL_OPT_BYTES && *end) {
    switch (tolower((unsigned char)*end)) {
    case 'k': mult = (int64_t)1 << 10; break;
    case 'm': mult = (int64_t)1 << 20; break;
    case 'g': mult = (int64_t)1 << 30; break;
    case 't': mult = (int64_t)1 << 40; break;
    default: return range_error(i, s, err, errlen);
    }
    end++;
    if (tolower((unsigned char)*end) == 'i') end++;
    if (tolower((unsigned char)*end) == 'b') end++;
  }
  while (isspace((unsigned char)*end)) end++;
  if (*end) return range_error(i, s, err, errlen);
  if (mult > 1 && (v > INT64_MAX / mult || v < INT64_MIN / mult))
    return range_error(i, s, err, errlen);
  *out = (int64_t)v * mult;
  return HL_OK;
}

int hl_options_set(hl_options *opts, const char *name, const char *value, char *err,
                   size_t errlen) {
  int i = hl_option_index(name);
  if (i < 0) {
    hl__fmt_err(err, errlen, "unknown option '%s'", name ? name : "(null)");
    return HL_EOPTION;
  }
  if (!value) return range_error(i, "(null)", err, errlen);
  int64_t v = 0;
  int rc = parse(i, value, &v, err, errlen);
  if (rc) return rc;
  return hl_options_set_int(opts, name, v, err, errlen);
}

int hl_options_get(const hl_options *opts, const char *name, int64_t *out) {
  int i = hl_option_index(name);
  if (i < 0 || !opts || !out) return HL_EOPTION;
  *out = *(const int64_t *)((const char *)opts + offsets[i]);
  return HL_OK;
}

int hl_options_from_env(hl_options *opts, char *err, size_t errlen) {
  for (int i = 0; i < NOPT; i++) {
    char var[96] = "HEAPLAB_";
    size_t n = strlen(var);
    for (const char *p = table[i].name; *p && n + 1 < sizeof var; p++)
      var[n++] = (char)toupper((unsigned char)*p);
    var[n] = 0;
    const char *v = getenv(var);
    if (!v) continue;
    char inner[256];
    int rc = hl_options_set(opts, table[i].name, v, inner, sizeof inner);
    if (rc) {
      hl__fmt_err(err, errlen, "environment %s=%s: %s", var, v, inner);
      return rc;
    }
  }
  return HL_OK;
}

int hl_options_validate(const hl_options *o, char *err, size_t errlen) {
  if (!o) {
    hl__fmt_err(err, errlen, "options: NULL options struct");
    return HL_EINVAL;
  }
  for (int i = 0; i < NOPT; i++) {
    int rc = check_value(i, *(const int64_t *)((const char *)o + offsets[i]), err, errlen);
    if (rc) return rc;
  }
  int64_t ps = o->page_size;
  if (ps & (ps - 1)) {
    hl__fmt_err(err, errlen, "option page_size: %" PRId64 " is not a power of two", ps);
    return HL_EVALUE;
  }
  if ((size_t)ps < prim_os_page_size()) {
    hl__fmt_err(err, errlen, "option page_size: %" PRId64 " is below the OS page size %zu", ps,
                prim_os_page_size());
    return HL_EVALUE;
  }
  if (o->small_max > ps / 4) {
    hl__fmt_err(err, errlen,
                "option small_max: %" PRId64 " exceeds page_size/4 = %" PRId64
                " (a page must hold at least 4 objects)",
                o->small_max, ps / 4);
    return HL_EVALUE;
  }
  if (o->reserve_bytes < 16 * ps) {
    hl__fmt_err(err, errlen,
                "option reserve_bytes: %" PRId64 " is below 16 pages of page_size %" PRId64,
                o->reserve_bytes, ps);
    return HL_EVALUE;
  }
  if (o->gc_trigger_min_bytes > o->gc_trigger_max_bytes) {
    hl__fmt_err(err, errlen,
                "option gc_trigger_min_bytes: %" PRId64 " exceeds gc_trigger_max_bytes %" PRId64,
                o->gc_trigger_min_bytes, o->gc_trigger_max_bytes);
    return HL_EVALUE;
  }
  return HL_OK;
}
