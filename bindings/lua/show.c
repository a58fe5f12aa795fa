/*
 * show.c -- __tostring for the plain tables the module returns, so the REPL
 * (and print) shows what is in them instead of "table: 0x...".
 *
 *   heaplab.stats      h:stats()          every counter, in HL_STATS order
 *   heaplab.footprint  heaplab.footprint() the five figures in MiB
 *   heaplab.events     h:events()         one line per event
 *   heaplab.event      each of its items  kind, cycle, time and the kind's fields
 *
 * They stay ordinary tables (fields read and written as before, pairs and #
 * as before): the metatable carries __tostring and __name only.  Each
 * __tostring reads the table as it is now, so a field the program changed
 * shows its new value.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lhl.h"

enum { WRAP = 96, EVENTS_SHOWN = 40 };

/* The text is built as pieces pushed on the stack and joined by lua_concat
 * (a table being read stays below them, at an absolute index). */
typedef struct text {
  lua_State *L;
  int pieces;
  size_t col;        /* column of the current line */
  const char *wrap;  /* what starts a continuation line */
} text;

static void put(text *x, const char *s) {
  /* up to 32 pieces, the table, an item and value_of's two: more than the
   * LUA_MINSTACK (20) slots a C function is given, so ask for them (pushing
   * past the stack wrote over the next block: SIGSEGV at some call depths) */
  luaL_checkstack(x->L, 6, "heaplab: tostring");
  lua_pushstring(x->L, s);
  const char *nl = strrchr(s, '\n');
  x->col = nl ? strlen(nl + 1) : x->col + strlen(s);
  if (++x->pieces >= 32) {
    lua_concat(x->L, x->pieces);
    x->pieces = 1;
  }
}

static int done(text *x) {
  lua_concat(x->L, x->pieces);
  return 1;
}

/* t[key] as text into buf ("" when nil); the stack as before. */
static const char *value_of(lua_State *L, int t, const char *key, char *buf, size_t len) {
  buf[0] = 0;
  if (lua_getfield(L, t, key) == LUA_TNIL) {
    lua_pop(L, 1);
    return buf;
  }
  snprintf(buf, len, "%s", luaL_tolstring(L, -1, NULL));
  lua_pop(L, 2);
  return buf;
}

/* " name=value" of t[name], wrapping the line at WRAP columns. */
static void put_field(text *x, int t, const char *name) {
  char v[96], item[160];
  if (!*value_of(x->L, t, name, v, sizeof v)) return;
  snprintf(item, sizeof item, "%s=%s", name, v);
  put(x, x->col + 1 + strlen(item) > WRAP ? x->wrap : " ");
  put(x, item);
}

static int stats_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  text x = {L, 0, 0, "\n  "};
  put(&x, "heaplab.stats:");
  for (int i = 0; i < hl_stat_count(); i++) put_field(&x, 1, hl_stat_name(i));
  return done(&x);
}

static int footprint_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  static const char *const names[] = {"phys_footprint", "rss", "anonymous", "lazyfree", "swap",
                                      "anon_huge"};
  text x = {L, 0, 0, "\n  "};
  put(&x, "heaplab.footprint:");
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    lua_getfield(L, 1, names[i]);
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, -1, &ok);
    lua_pop(L, 1);
    char item[80], mib[32];
    lhl_mib(mib, sizeof mib, (uint64_t)v);
    snprintf(item, sizeof item, "%s %s %s", i ? "," : "", names[i], ok ? mib : "?");
    put(&x, item);
  }
  return done(&x);
}

/* The kind's field names, in C's order ("a,b,c"), or NULL. */
static const char *kind_fields(const char *kind) {
  for (int k = 0; k < HL_EV_COUNT; k++)
    if (strcmp(hl_event_name(k), kind) == 0) return hl_event_fields(k);
  return NULL;
}

/* The event table at absolute index t: "cycle (cycle 3, time_ns 123): major=0 ..." */
static void put_event(text *x, int t) {
  char kind[64], cycle[32], time[32], head[160];
  value_of(x->L, t, "kind", kind, sizeof kind);
  value_of(x->L, t, "cycle", cycle, sizeof cycle);
  value_of(x->L, t, "time_ns", time, sizeof time);
  snprintf(head, sizeof head, "%s (cycle %s, time_ns %s):", *kind ? kind : "?",
           *cycle ? cycle : "?", *time ? time : "?");
  put(x, head);
  const char *fields = kind_fields(kind);
  while (fields && *fields) {
    const char *end = strchr(fields, ',');
    size_t len = end ? (size_t)(end - fields) : strlen(fields);
    char name[64];
    if (len >= sizeof name) len = sizeof name - 1;
    memcpy(name, fields, len);
    name[len] = 0;
    put_field(x, t, name);
    fields = end ? end + 1 : fields + len;
  }
}

static int event_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  text x = {L, 0, 0, "\n  "};
  put(&x, "heaplab.event: ");
  put_event(&x, 1);
  return done(&x);
}

/* "heaplab.events: N", then one line per event; past EVENTS_SHOWN the first
 * and last halves, with how many were left out between them. */
static int events_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  text x = {L, 0, 0, "\n      "};
  char line[96];
  snprintf(line, sizeof line, "heaplab.events: %lld", (long long)n);
  put(&x, line);
  for (lua_Integer i = 1; i <= n; i++) {
    if (n > EVENTS_SHOWN && i == EVENTS_SHOWN / 2 + 1) {
      snprintf(line, sizeof line, "\n  ... %lld more ...", (long long)(n - EVENTS_SHOWN));
      put(&x, line);
      i = n - EVENTS_SHOWN / 2;
      continue;
    }
    snprintf(line, sizeof line, "\n  [%lld] ", (long long)i);
    put(&x, line);
    /* the item sits at a fixed index below the pieces, removed afterwards */
    lua_rawgeti(L, 1, i);
    lua_insert(L, 2);
    if (lua_istable(L, 2)) {
      put_event(&x, 2);
    } else {
      char v[96];
      snprintf(v, sizeof v, "%s", luaL_tolstring(L, 2, NULL));
      lua_pop(L, 1);
      put(&x, v);
    }
    lua_remove(L, 2);
  }
  return done(&x);
}

static void new_table_type(lua_State *L, const char *name, lua_CFunction tostring) {
  lhl_newmetatable(L, name); /* sets __name; replaces what is not ours */
  lua_pushcfunction(L, tostring);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}

void lhl_open_show(lua_State *L) {
  new_table_type(L, STATS_MT, stats_tostring);
  new_table_type(L, FOOTPRINT_MT, footprint_tostring);
  new_table_type(L, EVENTS_MT, events_tostring);
  new_table_type(L, EVENT_MT, event_tostring);
}
