/*
 * show.c -- __tostring for the plain tables the module returns, so the REPL
 * (and print) shows what is in them instead of "table: 0x...".
 *
 *   heaplab.stats      h:stats()          every counter, in HL_STATS order
 *   heaplab.footprint  heaplab.footprint() the five figures in MiB
 *   heaplab.events     h:events()         one line per event
 *   heaplab.event      each of its items  kind, cycle, time and the kind's fields
 *
 * and every other table the module returns -- s:summary(), s:series(),
 * h:churn(), h:options(), heaplab.options() and its entries, h:faults() and
 * its sites -- by one __tostring, show_table: its fields in the order
 * record_fields gives for its __name (the rest sorted), at the top level a
 * field holding a table of the module's on a line of its own, a list one
 * line per item.
 *
 * They stay ordinary tables (fields read and written as before, pairs and #
 * as before): the metatable carries __tostring and __name only.  Each
 * __tostring reads the table as it is now, so a field the program changed
 * shows its new value.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "lhl.h"

enum { WRAP = 96, EVENTS_SHOWN = 40 };

/* ---- cycles: a table that holds itself --------------------------------------
 *
 * Every __tostring here reads its fields with luaL_tolstring, which calls the
 * __tostring of a field that is one of the module's tables (or a program's
 * table with one of its own): a table holding itself (o.self = o, a list
 * holding its table, a program's __tostring that prints the table back)
 * recursed until "C stack overflow".  The tables being shown are kept in a
 * registry table (SHOWING: table -> true, and "depth" how many); one shown
 * again is "<cycle>", and past MAX_DEPTH nested ones "<too deep>". */
enum { MAX_DEPTH = 8 };
static const char SHOWING = 0;

/* The registry's SHOWING table, pushed (made if absent or replaced). */
static void showing_set(lua_State *L) {
  luaL_checkstack(L, 4, "heaplab: tostring");
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &SHOWING) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &SHOWING);
}

/* True when the value at idx is a table being shown (up the C stack). */
static bool showing(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TTABLE) return false;
  idx = lua_absindex(L, idx);
  showing_set(L);
  lua_pushvalue(L, idx);
  bool on = lua_rawget(L, -2) != LUA_TNIL;
  lua_pop(L, 2);
  return on;
}

/* SHOWING[t] = on (t at the absolute index t), its depth one more or less;
 * returns the depth before. */
static lua_Integer mark(lua_State *L, int t, bool on) {
  showing_set(L);
  lua_getfield(L, -1, "depth");
  lua_Integer depth = lua_tointeger(L, -1);
  lua_pop(L, 1);
  lua_pushinteger(L, on ? depth + 1 : depth > 0 ? depth - 1 : 0);
  lua_setfield(L, -2, "depth");
  lua_pushvalue(L, t);
  if (on) lua_pushboolean(L, 1);
  else lua_pushnil(L);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  return depth;
}

/* The __tostring of each table type: its show function (upvalue 1) run in a
 * protected call with the table marked, unmarked whatever it does (an error
 * in a field's __tostring is raised again after). */
static int guarded_tostring(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  if (showing(L, 1)) {
    lua_pushliteral(L, "<cycle>");
    return 1;
  }
  if (mark(L, 1, true) >= MAX_DEPTH) {
    mark(L, 1, false);
    lua_pushliteral(L, "<too deep>");
    return 1;
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, 1);
  int status = lua_pcall(L, 1, 1, 0);
  mark(L, 1, false);
  if (status != LUA_OK) return lua_error(L);
  return 1;
}

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

/* Past EVENTS_SHOWN items a list shows its first and last halves: at item i
 * of n, true when it is the first left out -- line says how many, and *i
 * becomes the last one left out (the loop's next item is the second half's
 * first).  h:events() and show_table's lists. */
static bool elided(lua_Integer n, lua_Integer *i, char *line, size_t len) {
  if (n <= EVENTS_SHOWN || *i != EVENTS_SHOWN / 2 + 1) return false;
  snprintf(line, len, "\n  ... %lld more ...", (long long)(n - EVENTS_SHOWN));
  *i = n - EVENTS_SHOWN / 2;
  return true;
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
    if (elided(n, &i, line, sizeof line)) {
      put(&x, line);
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

/* ---- show_table: the other tables ------------------------------------------ */

/* The fields of a table of each name, in the order shown (those not listed
 * come after, sorted); a list's (s:series()) name its items' 1, 2, ... */
static const struct {
  const char *name, *fields;
} record_fields[] = {
#define NAME_(name) #name ","
    {SUMMARY_MT, LHL_SUMMARY_FIELDS(NAME_)},
    {SERIES_MT, "t_ns,phys,rss,lazyfree"},
    {CHURN_MT, LHL_CHURN_FIELDS(NAME_)},
#undef NAME_
    {OPTION_MT, "kind,default,min,max,choices,description"},
    {FAULT_MT, "mode,n,errno,calls,fired"},
    {EFFECTIVE_MT, ""},
    {OPTIONS_MT, ""},
    {FAULTS_MT, ""},
};

/* The field order of the table at t by its metatable's __name (raw), "" if none. */
static const char *fields_of(lua_State *L, int t) {
  const char *fields = "";
  if (!lua_getmetatable(L, t)) return fields;
  lua_pushliteral(L, "__name");
  if (lua_rawget(L, -2) == LUA_TSTRING)
    for (size_t i = 0; i < sizeof record_fields / sizeof record_fields[0]; i++)
      if (strcmp(lua_tostring(L, -1), record_fields[i].name) == 0) fields = record_fields[i].fields;
  lua_pop(L, 2);
  return fields;
}

/* The text of show_table: pieces appended to a table (at `parts`, an
 * absolute index) and joined at the end, so the values read meanwhile can
 * sit on the stack. */
typedef struct rtext {
  lua_State *L;
  int parts;
  lua_Integer n;
  size_t col;
  const char *wrap;
} rtext;

static void rput(rtext *x, const char *s) {
  lua_pushstring(x->L, s);
  lua_rawseti(x->L, x->parts, ++x->n);
  const char *nl = strrchr(s, '\n');
  x->col = nl ? strlen(nl + 1) : x->col + strlen(s);
}

static int listed(const char *fields, const char *key) {
  size_t k = strlen(key);
  for (const char *p = fields; p && *p;) {
    if (strncmp(p, key, k) == 0 && (p[k] == ',' || p[k] == 0)) return 1;
    p = strchr(p, ',');
    if (p) p++;
  }
  return 0;
}

/* " name=value" of the value on top (popped), wrapping at WRAP: a string
 * with a space (or empty) quoted, a plain list "{a, b}", anything else as
 * tostring shows it. */
static void rput_value(rtext *x, const char *name) {
  lua_State *L = x->L;
  luaL_checkstack(L, 8, "heaplab: tostring");
  int v = lua_absindex(L, -1);
  int list = lua_type(L, v) == LUA_TTABLE && !lua_getmetatable(L, v);
  if (lua_gettop(L) > v) lua_pop(L, 1); /* (the metatable: not a plain list) */
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, name);
  luaL_addchar(&b, '=');
  if (list) {
    lua_Integer n = (lua_Integer)lua_rawlen(L, v);
    luaL_addchar(&b, '{');
    for (lua_Integer i = 1; i <= n && i <= 64; i++) {
      if (i > 1) luaL_addstring(&b, ", ");
      lua_rawgeti(L, v, i);
      luaL_tolstring(L, -1, NULL);
      lua_remove(L, -2);
      luaL_addvalue(&b);
    }
    luaL_addstring(&b, n > 64 ? ", ...}" : "}");
  } else if (lua_type(L, v) == LUA_TSTRING &&
             (lua_rawlen(L, v) == 0 || strchr(lua_tostring(L, v), ' '))) {
    luaL_addchar(&b, '"');
    lua_pushvalue(L, v);
    luaL_addvalue(&b);
    luaL_addchar(&b, '"');
  } else {
    luaL_tolstring(L, v, NULL);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  const char *item = lua_tostring(L, -1);
  rput(x, x->col + 1 + strlen(item) > WRAP ? x->wrap : " ");
  rput(x, item);
  lua_pop(L, 2); /* the item, the value */
}

static void rput_record(rtext *x, int t, int nested);

/* t[key] for the key on top (popped): " key=value"; at the top level a
 * table with a metatable of its own (a fault site, an option) is a line of
 * its own, "key:" and its fields. */
static void rput_key(rtext *x, int t, int nested) {
  lua_State *L = x->L;
  luaL_checkstack(L, 4, "heaplab: tostring");
  int key = lua_gettop(L);
  lua_pushvalue(L, key);
  lua_rawget(L, t);
  const char *name = lua_tostring(L, key);
  if (showing(L, -1)) { /* (the table itself, or one up the stack) */
    lua_pop(L, 1);
    lua_pushliteral(L, "<cycle>");
    rput_value(x, name);
  } else if (!nested && lua_type(L, -1) == LUA_TTABLE && lua_getmetatable(L, -1)) {
    lua_pop(L, 1);
    const char *wrap = x->wrap;
    rput(x, "\n  ");
    rput(x, name);
    rput(x, ":");
    x->wrap = "\n      ";
    rput_record(x, lua_absindex(L, -1), 1);
    x->wrap = wrap;
    lua_pop(L, 1);
  } else if (!lua_isnil(L, -1)) {
    rput_value(x, name);
  } else {
    lua_pop(L, 1);
  }
  lua_pop(L, 1); /* the key */
}

/* The fields of the table at t: in fields_of order, then its other string
 * keys sorted. */
static void rput_record(rtext *x, int t, int nested) {
  lua_State *L = x->L;
  luaL_checkstack(L, 8, "heaplab: tostring");
  const char *fields = fields_of(L, t);
  for (const char *p = fields; p && *p;) {
    size_t k = strcspn(p, ",");
    lua_pushlstring(L, p, k);
    rput_key(x, t, nested);
    p = p[k] ? p + k + 1 : NULL;
  }
  lua_newtable(L);
  int keys = lua_gettop(L);
  lua_Integer n = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) == LUA_TSTRING && !listed(fields, lua_tostring(L, -1))) {
      lua_pushvalue(L, -1);
      lua_rawseti(L, keys, ++n);
    }
  }
  for (lua_Integer i = 2; i <= n; i++) /* insertion sort: a few dozen keys */
    for (lua_Integer j = i; j > 1; j--) {
      lua_rawgeti(L, keys, j - 1);
      lua_rawgeti(L, keys, j);
      if (strcmp(lua_tostring(L, -2), lua_tostring(L, -1)) <= 0) {
        lua_pop(L, 2);
        break;
      }
      lua_rawseti(L, keys, j - 1);
      lua_rawseti(L, keys, j);
    }
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, keys, i);
    rput_key(x, t, nested);
  }
  lua_pop(L, 1);
}

/* __tostring of every table record_fields names: "heaplab.summary:
 * samples=3 ...", "heaplab.faults:" and a line a site; a list (s:series())
 * "heaplab.series: N", then a line an item, its 1, 2, ... named by the
 * fields (past EVENTS_SHOWN, the first and last halves, as h:events()). */
static int show_table(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 1);
  lua_newtable(L);
  rtext x = {L, 2, 0, 0, "\n  "};
  if (luaL_getmetafield(L, 1, "__name") == LUA_TSTRING) {
    rput(&x, lua_tostring(L, -1));
    lua_pop(L, 1);
  } else {
    rput(&x, "table");
  }
  rput(&x, ":");
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  if (n > 0) {
    const char *fields = fields_of(L, 1);
    char line[64];
    snprintf(line, sizeof line, " %lld", (long long)n);
    rput(&x, line);
    for (lua_Integer i = 1; i <= n; i++) {
      if (elided(n, &i, line, sizeof line)) {
        rput(&x, line);
        continue;
      }
      snprintf(line, sizeof line, "\n  [%lld]", (long long)i);
      rput(&x, line);
      x.wrap = "\n      ";
      lua_rawgeti(L, 1, i);
      int item = lua_gettop(L);
      if (lua_type(L, item) == LUA_TTABLE) {
        lua_Integer m = (lua_Integer)lua_rawlen(L, item);
        const char *p = fields;
        for (lua_Integer k = 1; k <= m; k++) {
          char fname[64];
          size_t len = p ? strcspn(p, ",") : 0;
          if (len) snprintf(fname, sizeof fname, "%.*s", (int)len, p);
          else snprintf(fname, sizeof fname, "%lld", (long long)k);
          if (p) p = p[len] ? p + len + 1 : NULL;
          lua_rawgeti(L, item, k);
          rput_value(&x, fname);
        }
      } else {
        rput(&x, " ");
        rput(&x, luaL_tolstring(L, item, NULL));
      }
      lua_settop(L, 2);
      x.wrap = "\n  ";
    }
  }
  rput_record(&x, 1, 0);
  luaL_Buffer b; /* table.concat of the parts */
  luaL_buffinit(L, &b);
  for (lua_Integer i = 1; i <= x.n; i++) {
    lua_rawgeti(L, 2, i);
    luaL_addvalue(&b);
  }
  luaL_pushresult(&b);
  return 1;
}

static void new_table_type(lua_State *L, const char *name, lua_CFunction tostring) {
  lhl_newmetatable(L, name); /* sets __name; replaces what is not ours */
  lua_pushcfunction(L, tostring);
  lua_pushcclosure(L, guarded_tostring, 1);
  lua_setfield(L, -2, "__tostring");
  lua_pop(L, 1);
}

void lhl_open_show(lua_State *L) {
  new_table_type(L, STATS_MT, stats_tostring);
  new_table_type(L, FOOTPRINT_MT, footprint_tostring);
  new_table_type(L, EVENTS_MT, events_tostring);
  new_table_type(L, EVENT_MT, event_tostring);
  for (size_t i = 0; i < sizeof record_fields / sizeof record_fields[0]; i++)
    new_table_type(L, record_fields[i].name, show_table);
}
