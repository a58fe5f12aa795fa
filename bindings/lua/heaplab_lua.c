/*
 * heaplab_lua.c -- the Lua 5.4 module: local heaplab = require "heaplab".
 *
 * A thin layer over libheaplab (heaplab.h); no policy lives here.  Option
 * names, kinds and ranges, stat names, event fields and fault sites are read
 * from the C declarations (hl_option_info_get, hl_stat_name, ...), never
 * retyped.  DESIGN.md section 2 (Lua) is the contract; docs/lua.md the guide.
 *
 * Three userdata types, each built the liolib way: created in a safe "closed"
 * state BEFORE anything is acquired (so an error half-way leaks nothing), one
 * idempotent finalizer serving both __gc and __close, methods reached
 * through __index.
 *
 *   heaplab.heap     an hl_heap *; NULL once closed.
 *   heaplab.object   a handle (hl_ref, a root) plus, in its user value, the
 *                    heap userdata -- so a heap stays alive while any of its
 *                    handles does, and a handle can tell that its heap was
 *                    closed (the hl_heap * is gone) instead of using it.
 *   heaplab.sampler  an hl_sampler * (the footprint sampling thread).
 *
 * Errors are Lua errors whose message names the function, the argument and
 * what was wrong ("h:alloc: size must be >= 0, got -1").  Nothing here is
 * allowed to crash on bad input: every argument is checked before it reaches
 * C, and C's own error codes become Lua errors with hl_heap_error's message.
 *
 * Slots are 1-based in Lua (o[1] is C's slot 0).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "heaplab.h"

#define HEAP_MT "heaplab.heap"
#define OBJ_MT "heaplab.object"
#define SAMPLER_MT "heaplab.sampler"

typedef struct lheap {
  hl_heap *h;              /* NULL when closed */
  int manual;              /* mode=manual: no handles, no collector */
  int64_t events_capacity; /* events() reads at most this many */
} lheap;

typedef struct lobj {
  hl_ref ref; /* 0 when released (or never acquired) */
} lobj;

typedef struct lsampler {
  hl_sampler *s; /* NULL when stopped */
} lsampler;

/* ---- errors ---------------------------------------------------------------- */

/* Raise "fn: message".  luaL_error prefixes the caller's position. */
static int fail(lua_State *L, const char *fn, const char *fmt, ...) {
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return luaL_error(L, "%s: %s", fn, msg);
}

/* A C error code from a heap call: the heap's own message and the code's name. */
static int fail_rc(lua_State *L, const char *fn, hl_heap *h, int rc) {
  const char *msg = h ? hl_heap_error(h) : NULL;
  if (!msg || !*msg) msg = hl_error_name(rc);
  /* C's messages start with their own verb ("inject: ..."); when it is the
   * method's name, say it once: "h:inject: every needs N >= 1". */
  const char *verb = strrchr(fn, ':');
  verb = verb ? verb + 1 : fn;
  size_t n = strlen(verb);
  if (strncmp(msg, verb, n) == 0 && msg[n] == ':' && msg[n + 1] == ' ') msg += n + 2;
  return fail(L, fn, "%s (%s)", msg, hl_error_name(rc));
}

static const char *tname(lua_State *L, int idx) { return luaL_typename(L, idx); }

/* "a string 'abc'", "the number 1.5", "a table": what the caller passed. */
static const char *shown(lua_State *L, int idx, char *buf, size_t len) {
  switch (lua_type(L, idx)) {
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx))
      snprintf(buf, len, "%lld", (long long)lua_tointeger(L, idx));
    else
      snprintf(buf, len, "%.17g", (double)lua_tonumber(L, idx));
    return buf;
  case LUA_TSTRING: snprintf(buf, len, "'%.60s'", lua_tostring(L, idx)); return buf;
  case LUA_TBOOLEAN: return lua_toboolean(L, idx) ? "true" : "false";
  case LUA_TNONE: return "nothing";
  case LUA_TUSERDATA:
    switch (luaL_getmetafield(L, idx, "__name")) {
    case LUA_TNIL: break; /* nothing pushed */
    case LUA_TSTRING:
      snprintf(buf, len, "a %.60s", lua_tostring(L, -1));
      lua_pop(L, 1);
      return buf;
    default: lua_pop(L, 1);
    }
    /* fall through */
  default: snprintf(buf, len, "a %s", tname(L, idx)); return buf;
  }
}

/* ---- argument checking --------------------------------------------------------- */

/* An integer argument: an integer, or a float with an integral value. */
static int64_t arg_int(lua_State *L, int idx, const char *fn, const char *name) {
  char b[80];
  if (lua_type(L, idx) != LUA_TNUMBER)
    return fail(L, fn, "%s must be an integer, got %s", name, shown(L, idx, b, sizeof b));
  int ok = 0;
  lua_Integer v = lua_tointegerx(L, idx, &ok);
  if (!ok)
    return fail(L, fn, "%s must be an integer, got %s", name, shown(L, idx, b, sizeof b));
  return (int64_t)v;
}

/* An integer in [0, max]; `def` when absent or nil and def >= 0 (else required). */
static uint64_t arg_uint(lua_State *L, int idx, const char *fn, const char *name, uint64_t max,
                         int64_t def) {
  if (def >= 0 && lua_isnoneornil(L, idx)) return (uint64_t)def;
  int64_t v = arg_int(L, idx, fn, name);
  if (v < 0) return (uint64_t)fail(L, fn, "%s must be >= 0, got %" PRId64, name, v);
  if ((uint64_t)v > max)
    return (uint64_t)fail(L, fn, "%s %" PRId64 " exceeds the maximum of %" PRIu64, name, v, max);
  return (uint64_t)v;
}

static double arg_number(lua_State *L, int idx, const char *fn, const char *name) {
  char b[80];
  if (lua_type(L, idx) != LUA_TNUMBER)
    return fail(L, fn, "%s must be a number, got %s", name, shown(L, idx, b, sizeof b));
  return (double)lua_tonumber(L, idx);
}

/* nil/absent -> def; a boolean -> itself; anything else is an error. */
static int arg_bool(lua_State *L, int idx, const char *fn, const char *name, int def) {
  char b[80];
  if (lua_isnoneornil(L, idx)) return def;
  if (!lua_isboolean(L, idx))
    return fail(L, fn, "%s must be a boolean, got %s", name, shown(L, idx, b, sizeof b));
  return lua_toboolean(L, idx);
}

/* ---- declarations read from C ------------------------------------------------------ */

static const char *kind_name(int kind) {
  switch (kind) {
  case HL_OPT_BOOL: return "bool";
  case HL_OPT_INT: return "int";
  case HL_OPT_BYTES: return "bytes";
  default: return "enum";
  }
}

/* Push choice k of a comma-separated list, or nil. */
static void push_choice(lua_State *L, const char *choices, int64_t k) {
  const char *c = choices;
  for (int64_t i = 0; c && *c; i++) {
    const char *end = strchr(c, ',');
    size_t n = end ? (size_t)(end - c) : strlen(c);
    if (i == k) {
      lua_pushlstring(L, c, n);
      return;
    }
    if (!end) break;
    c = end + 1;
  }
  lua_pushnil(L);
}

/* An option's value as Lua shows it: boolean, choice name or integer. */
static void push_option_value(lua_State *L, const hl_option_info *info, int64_t v) {
  if (info->kind == HL_OPT_BOOL)
    lua_pushboolean(L, v != 0);
  else if (info->kind == HL_OPT_ENUM)
    push_choice(L, info->choices, v);
  else
    lua_pushinteger(L, (lua_Integer)v);
}

/* heaplab.options() -> {name = {kind, default, min, max, choices, description}} */
static int l_options(lua_State *L) {
  int n = hl_option_count();
  lua_createtable(L, 0, n);
  for (int i = 0; i < n; i++) {
    hl_option_info info;
    if (hl_option_info_get(i, &info)) continue;
    lua_createtable(L, 0, 6);
    lua_pushstring(L, kind_name(info.kind));
    lua_setfield(L, -2, "kind");
    push_option_value(L, &info, info.def);
    lua_setfield(L, -2, "default");
    lua_pushinteger(L, (lua_Integer)info.min);
    lua_setfield(L, -2, "min");
    lua_pushinteger(L, (lua_Integer)info.max);
    lua_setfield(L, -2, "max");
    if (info.kind == HL_OPT_ENUM) {
      lua_newtable(L);
      for (int64_t k = info.min; k <= info.max; k++) {
        push_choice(L, info.choices, k);
        lua_rawseti(L, -2, (lua_Integer)(k - info.min + 1));
      }
      lua_setfield(L, -2, "choices");
    }
    lua_pushstring(L, info.description);
    lua_setfield(L, -2, "description");
    lua_setfield(L, -2, info.name);
  }
  return 1;
}

static int l_stat_names(lua_State *L) {
  int n = hl_stat_count();
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, hl_stat_name(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_fault_sites(lua_State *L) {
  lua_createtable(L, HL_SITE_COUNT, 0);
  for (int i = 0; i < HL_SITE_COUNT; i++) {
    lua_pushstring(L, hl_fault_site_name(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

static int l_fault_modes(lua_State *L) {
  lua_createtable(L, HL_FAULT_MODE_COUNT, 0);
  for (int i = 0; i < HL_FAULT_MODE_COUNT; i++) {
    lua_pushstring(L, hl_fault_mode_name(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* ---- process-wide probes --------------------------------------------------------- */

static int l_footprint(lua_State *L) {
  hl_footprint f;
  int rc = hl_footprint_get(&f);
  if (rc) return fail(L, "heaplab.footprint", "cannot read /proc/self/smaps_rollup (%s)",
                      hl_error_name(rc));
  lua_createtable(L, 0, 5);
  lua_pushinteger(L, (lua_Integer)f.rss);
  lua_setfield(L, -2, "rss");
  lua_pushinteger(L, (lua_Integer)f.anonymous);
  lua_setfield(L, -2, "anonymous");
  lua_pushinteger(L, (lua_Integer)f.lazyfree);
  lua_setfield(L, -2, "lazyfree");
  lua_pushinteger(L, (lua_Integer)f.swap);
  lua_setfield(L, -2, "swap");
  lua_pushinteger(L, (lua_Integer)f.phys_footprint);
  lua_setfield(L, -2, "phys_footprint");
  return 1;
}

/* CLOCK_MONOTONIC in ns: the clock of the sampler's series and of events. */
static int l_clock_ns(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushinteger(L, (lua_Integer)ts.tv_sec * 1000000000 + ts.tv_nsec);
  return 1;
}

static int l_pid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getpid());
  return 1;
}

/* ---- heaps ----------------------------------------------------------------------------- */

/* The heap userdata at idx; `fn` names the method for the error. */
static lheap *heap_ud(lua_State *L, int idx, const char *fn) {
  lheap *lh = luaL_testudata(L, idx, HEAP_MT);
  if (!lh) {
    char b[80];
    fail(L, fn, "expected a heap as self (call it with ':'), got %s", shown(L, idx, b, sizeof b));
  }
  return lh;
}

/* An open heap at idx, or an error saying it is closed. */
static hl_heap *heap_open(lua_State *L, int idx, const char *fn) {
  lheap *lh = heap_ud(L, idx, fn);
  if (!lh->h) fail(L, fn, "the heap is closed");
  return lh->h;
}

static void heap_call(lua_State *L, const char *fn, hl_heap *h, int rc) {
  if (rc) fail_rc(L, fn, h, rc);
}

/* Build hl_options from defaults, HEAPLAB_* environment, then the table at idx. */
static void build_options(lua_State *L, int idx, hl_options *o) {
  static const char fn[] = "heaplab.heap";
  char err[256], b[80];
  hl_options_defaults(o);
  if (hl_options_from_env(o, err, sizeof err)) fail(L, fn, "%s", err);
  if (!lua_isnoneornil(L, idx)) {
    if (!lua_istable(L, idx))
      fail(L, fn, "argument 1 must be a table of options, got %s", shown(L, idx, b, sizeof b));
    lua_pushnil(L);
    while (lua_next(L, idx)) {
      /* key at -2, value at -1 */
      if (lua_type(L, -2) != LUA_TSTRING)
        fail(L, fn, "option names are strings, got the key %s", shown(L, -2, b, sizeof b));
      const char *name = lua_tostring(L, -2);
      int i = hl_option_index(name);
      if (i < 0) fail(L, fn, "unknown option '%s' (heaplab.options() lists them)", name);
      hl_option_info info;
      hl_option_info_get(i, &info);
      int rc = 0;
      switch (lua_type(L, -1)) {
      case LUA_TSTRING: rc = hl_options_set(o, name, lua_tostring(L, -1), err, sizeof err); break;
      case LUA_TBOOLEAN:
        if (info.kind != HL_OPT_BOOL)
          fail(L, fn, "option %s: expected %s, got a boolean", name,
               info.kind == HL_OPT_ENUM ? "a choice name (string)" : "an integer");
        rc = hl_options_set_int(o, name, lua_toboolean(L, -1), err, sizeof err);
        break;
      case LUA_TNUMBER: {
        if (info.kind == HL_OPT_ENUM)
          fail(L, fn, "option %s: expected one of '%s' as a string, got %s", name, info.choices,
               shown(L, -1, b, sizeof b));
        int ok = 0;
        lua_Integer v = lua_tointegerx(L, -1, &ok);
        if (!ok)
          fail(L, fn, "option %s: expected an integer, got %s", name, shown(L, -1, b, sizeof b));
        rc = hl_options_set_int(o, name, (int64_t)v, err, sizeof err);
        break;
      }
      default:
        fail(L, fn, "option %s: expected a %s value, got %s", name,
             info.kind == HL_OPT_BOOL ? "boolean" : info.kind == HL_OPT_ENUM ? "string" : "number",
             shown(L, -1, b, sizeof b));
      }
      if (rc) fail(L, fn, "%s", err);
      lua_pop(L, 1);
    }
  }
  if (hl_options_validate(o, err, sizeof err)) fail(L, fn, "%s", err);
}

/* heaplab.heap{ option = value, ... } */
static int l_heap(lua_State *L) {
  hl_options o;
  build_options(L, 1, &o);
  lheap *lh = lua_newuserdatauv(L, sizeof *lh, 0);
  lh->h = NULL; /* closed until hl_heap_new succeeds */
  lh->manual = o.mode == HL_MODE_MANUAL;
  lh->events_capacity = o.events_capacity;
  luaL_setmetatable(L, HEAP_MT);
  char err[256];
  hl_heap *h = NULL;
  int rc = hl_heap_new(&o, &h, err, sizeof err);
  if (rc) return fail(L, "heaplab.heap", "%s (%s)", err, hl_error_name(rc));
  lh->h = h;
  return 1;
}

/* The one finalizer of a heap: __gc, __close and h:close().  Its handles see
 * lh->h == NULL afterwards and refuse to run. */
static int heap_close(lua_State *L) {
  lheap *lh = luaL_checkudata(L, 1, HEAP_MT);
  hl_heap *h = lh->h;
  lh->h = NULL;
  hl_heap_free(h);
  return 0;
}

static int h_close(lua_State *L) {
  heap_ud(L, 1, "h:close");
  return heap_close(L);
}

static int h_closed(lua_State *L) {
  lua_pushboolean(L, heap_ud(L, 1, "h:closed")->h == NULL);
  return 1;
}

/* Push a new object userdata for heap at heap_idx, ref 0 (safe to collect). */
static lobj *obj_new(lua_State *L, int heap_idx) {
  heap_idx = lua_absindex(L, heap_idx);
  lobj *o = lua_newuserdatauv(L, sizeof *o, 1);
  o->ref = 0;
  luaL_setmetatable(L, OBJ_MT);
  lua_pushvalue(L, heap_idx);
  lua_setiuservalue(L, -2, 1);
  return o;
}

/* h:alloc(size, refs=0) */
static int h_alloc(lua_State *L) {
  static const char fn[] = "h:alloc";
  hl_heap *h = heap_open(L, 1, fn);
  uint64_t size = arg_uint(L, 2, fn, "size", hl_max_size(), -1);
  uint64_t refs = arg_uint(L, 3, fn, "refs", hl_max_refs(), 0);
  lobj *o = obj_new(L, 1);
  heap_call(L, fn, h, hl_alloc(h, size, refs, &o->ref));
  return 1;
}

/* h:fill(total_bytes, size, refs=0) */
static int h_fill(lua_State *L) {
  static const char fn[] = "h:fill";
  hl_heap *h = heap_open(L, 1, fn);
  uint64_t total = arg_uint(L, 2, fn, "total_bytes", hl_max_size(), -1);
  uint64_t size = arg_uint(L, 3, fn, "size", hl_max_size(), -1);
  uint64_t refs = arg_uint(L, 4, fn, "refs", hl_max_refs(), 0);
  lobj *o = obj_new(L, 1);
  heap_call(L, fn, h, hl_fill(h, total, size, refs, &o->ref));
  return 1;
}

/* h:collect{cycles = 1, major = nil|true|false}; h:collect(n) is h:collect{cycles = n}. */
static int h_collect(lua_State *L) {
  static const char fn[] = "h:collect";
  hl_heap *h = heap_open(L, 1, fn);
  int64_t cycles = 1;
  int major = -1;
  char b[80];
  if (lua_type(L, 2) == LUA_TNUMBER) {
    cycles = arg_int(L, 2, fn, "cycles");
  } else if (lua_istable(L, 2)) {
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
      if (k && strcmp(k, "cycles") == 0) {
        cycles = arg_int(L, -1, fn, "cycles");
      } else if (k && strcmp(k, "major") == 0) {
        major = arg_bool(L, -1, fn, "major", -1);
      } else {
        fail(L, fn, "unknown field %s in its table (fields: cycles, major)",
             shown(L, -2, b, sizeof b));
      }
      lua_pop(L, 1);
    }
  } else if (!lua_isnoneornil(L, 2)) {
    return fail(L, fn, "argument must be a table {cycles=, major=} or a number, got %s",
                shown(L, 2, b, sizeof b));
  }
  if (cycles < 1 || cycles > 1000000)
    return fail(L, fn, "cycles must be in [1, 1000000], got %" PRId64, cycles);
  heap_call(L, fn, h, hl_collect(h, (int)cycles, major));
  return 0;
}

static int h_trim(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:trim");
  heap_call(L, "h:trim", h, hl_trim(h));
  return 0;
}

static int h_check(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:check");
  heap_call(L, "h:check", h, hl_heap_check(h));
  return 0;
}

static int h_memory_pressure(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:memory_pressure");
  heap_call(L, "h:memory_pressure", h, hl_memory_pressure(h));
  return 0;
}

/* h:stats() -> {name = integer} (names from HL_STATS) */
static void push_stats(lua_State *L, const hl_stats *st) {
  const uint64_t *v = (const uint64_t *)st;
  int n = hl_stat_count();
  lua_createtable(L, 0, n);
  for (int i = 0; i < n; i++) {
    lua_pushinteger(L, (lua_Integer)v[i]);
    lua_setfield(L, -2, hl_stat_name(i));
  }
}

static int h_stats(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:stats");
  hl_stats st;
  heap_call(L, "h:stats", h, hl_stats_get(h, &st));
  push_stats(L, &st);
  return 1;
}

/* h:events(clear=true) -> { {kind=, cycle=, time_ns=, <fields>...}, ... } */
static int h_events(lua_State *L) {
  static const char fn[] = "h:events";
  lheap *lh = heap_ud(L, 1, fn);
  hl_heap *h = heap_open(L, 1, fn);
  int clear = arg_bool(L, 2, fn, "clear", 1);
  size_t cap = (size_t)lh->events_capacity;
  /* a userdata buffer: freed by Lua even if building the result raises */
  hl_event *buf = lua_newuserdatauv(L, cap * sizeof *buf, 0);
  size_t n = 0;
  heap_call(L, fn, h, hl_events_read(h, buf, cap, &n, clear));
  lua_createtable(L, (int)n, 0);
  for (size_t i = 0; i < n; i++) {
    const hl_event *e = &buf[i];
    lua_createtable(L, 0, 3 + e->nfields);
    lua_pushstring(L, hl_event_name(e->kind));
    lua_setfield(L, -2, "kind");
    lua_pushinteger(L, (lua_Integer)e->cycle);
    lua_setfield(L, -2, "cycle");
    lua_pushinteger(L, (lua_Integer)e->time_ns);
    lua_setfield(L, -2, "time_ns");
    const char *f = hl_event_fields(e->kind);
    for (int k = 0; f && *f && k < e->nfields && k < HL_EVENT_MAX_FIELDS; k++) {
      const char *end = strchr(f, ',');
      size_t len = end ? (size_t)(end - f) : strlen(f);
      lua_pushlstring(L, f, len);
      lua_pushinteger(L, (lua_Integer)e->fields[k]);
      lua_rawset(L, -3);
      f = end ? end + 1 : f + len;
    }
    lua_rawseti(L, -2, (lua_Integer)i + 1);
  }
  return 1;
}

static int h_resident_bytes(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:resident_bytes");
  uint64_t v = 0;
  heap_call(L, "h:resident_bytes", h, hl_resident_bytes(h, &v));
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

static int h_vma_count(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:vma_count");
  uint64_t v = 0;
  heap_call(L, "h:vma_count", h, hl_vma_count(h, &v));
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

/* h:range() -> base address, reserved bytes */
static int h_range(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:range");
  uint64_t base = 0, bytes = 0;
  heap_call(L, "h:range", h, hl_heap_range(h, &base, &bytes));
  lua_pushinteger(L, (lua_Integer)base);
  lua_pushinteger(L, (lua_Integer)bytes);
  return 2;
}

/* h:options() -> the effective options {name = value} */
static int h_options(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:options");
  hl_options o;
  heap_call(L, "h:options", h, hl_heap_options(h, &o));
  int n = hl_option_count();
  lua_createtable(L, 0, n);
  for (int i = 0; i < n; i++) {
    hl_option_info info;
    int64_t v = 0;
    if (hl_option_info_get(i, &info) || hl_options_get(&o, info.name, &v)) continue;
    push_option_value(L, &info, v);
    lua_setfield(L, -2, info.name);
  }
  return 1;
}

/* h:inject(site, mode, n=0, errno="ENOMEM") -- DESIGN.md section 4 */
static int h_inject(lua_State *L) {
  static const char fn[] = "h:inject";
  hl_heap *h = heap_open(L, 1, fn);
  char b[80];
  if (lua_type(L, 2) != LUA_TSTRING)
    return fail(L, fn, "site must be a string (one of heaplab.fault_sites()), got %s",
                shown(L, 2, b, sizeof b));
  int site = hl_fault_site_index(lua_tostring(L, 2));
  if (site < 0)
    return fail(L, fn, "unknown site '%s' (heaplab.fault_sites() lists them)", lua_tostring(L, 2));
  if (lua_type(L, 3) != LUA_TSTRING)
    return fail(L, fn, "mode must be a string (off, first, always, every, sticky), got %s",
                shown(L, 3, b, sizeof b));
  int mode = hl_fault_mode_index(lua_tostring(L, 3));
  if (mode < 0)
    return fail(L, fn, "unknown mode '%s' (off, first, always, every, sticky)", lua_tostring(L, 3));
  int64_t n = lua_isnoneornil(L, 4) ? 0 : arg_int(L, 4, fn, "n");
  int err = ENOMEM;
  if (lua_type(L, 5) == LUA_TSTRING) {
    err = hl_errno_index(lua_tostring(L, 5));
    if (err < 0)
      return fail(L, fn, "unknown errno '%s' (EAGAIN, ENOMEM, EINVAL, EIO, EPERM, EFAULT, EBUSY, "
                         "ENOSYS, or a number)", lua_tostring(L, 5));
  } else if (!lua_isnoneornil(L, 5)) {
    int64_t e = arg_int(L, 5, fn, "errno");
    if (e <= 0 || e > 4095) return fail(L, fn, "errno must be in [1, 4095], got %" PRId64, e);
    err = (int)e;
  }
  heap_call(L, fn, h, hl_inject(h, site, mode, n, err));
  return 0;
}

/* h:faults() -> {site = {mode=, n=, errno=, calls=, fired=}} */
static int h_faults(lua_State *L) {
  hl_heap *h = heap_open(L, 1, "h:faults");
  hl_fault_state buf[HL_SITE_COUNT];
  size_t n = 0;
  heap_call(L, "h:faults", h, hl_faults_get(h, buf, HL_SITE_COUNT, &n));
  lua_createtable(L, 0, (int)n);
  for (size_t i = 0; i < n; i++) {
    lua_createtable(L, 0, 5);
    lua_pushstring(L, hl_fault_mode_name(buf[i].mode));
    lua_setfield(L, -2, "mode");
    lua_pushinteger(L, (lua_Integer)buf[i].arg);
    lua_setfield(L, -2, "n");
    if (buf[i].err) {
      lua_pushstring(L, hl_errno_name(buf[i].err));
      lua_setfield(L, -2, "errno");
    }
    lua_pushinteger(L, (lua_Integer)buf[i].calls);
    lua_setfield(L, -2, "calls");
    lua_pushinteger(L, (lua_Integer)buf[i].fired);
    lua_setfield(L, -2, "fired");
    lua_setfield(L, -2, hl_fault_site_name(buf[i].site));
  }
  return 1;
}

/* h:churn(duration_s, size, live_bytes, rate_bytes_per_s=0) -> result table */
static int h_churn(lua_State *L) {
  static const char fn[] = "h:churn";
  hl_heap *h = heap_open(L, 1, fn);
  double dur = arg_number(L, 2, fn, "duration_s");
  if (!(dur > 0 && dur <= 3600)) return fail(L, fn, "duration_s must be in (0, 3600], got %g", dur);
  uint64_t size = arg_uint(L, 3, fn, "size", hl_max_size(), -1);
  if (size == 0) return fail(L, fn, "size must be at least 1 byte, got 0");
  uint64_t live = arg_uint(L, 4, fn, "live_bytes", hl_max_size(), -1);
  double rate = lua_isnoneornil(L, 5) ? 0.0 : arg_number(L, 5, fn, "rate_bytes_per_s");
  if (!(rate >= 0 && rate < 1e15))
    return fail(L, fn, "rate_bytes_per_s must be in [0, 1e15) (0 = as fast as possible), got %g",
                rate);
  hl_churn_result r;
  heap_call(L, fn, h, hl_churn(h, dur, size, live, rate, &r));
  lua_createtable(L, 0, 7);
#define F(name)                                                                \
  lua_pushinteger(L, (lua_Integer)r.name);                                     \
  lua_setfield(L, -2, #name);
  F(allocated_bytes) F(allocations) F(cycles) F(pacing_waits) F(pacing_wait_ns) F(elapsed_ns)
  F(peak_large_live_bytes)
#undef F
  return 1;
}

static void push_mib(char *buf, size_t len, uint64_t bytes) {
  snprintf(buf, len, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
}

/* One line for the REPL: mode, pages by state, handles, cycles, live bytes. */
static int heap_tostring(lua_State *L) {
  lheap *lh = luaL_checkudata(L, 1, HEAP_MT);
  if (!lh->h) {
    lua_pushfstring(L, "heaplab.heap (closed): %p", (void *)lh);
    return 1;
  }
  hl_stats st;
  if (hl_stats_get(lh->h, &st)) {
    lua_pushfstring(L, "heaplab.heap: %p", (void *)lh);
    return 1;
  }
  char small[32], large[32];
  push_mib(small, sizeof small, st.small_live_bytes);
  push_mib(large, sizeof large, st.large_live_bytes);
  char line[400];
  snprintf(line, sizeof line,
           "heaplab.heap(%s): %" PRIu64 " pages (%" PRIu64 " owned, %" PRIu64 " partial, %" PRIu64
           " free, %" PRIu64 " released), %" PRIu64 " handles, %" PRIu64 " cycles, live %s small"
           " + %s large",
           lh->manual ? "manual" : "collected", st.total_pages, st.owned_pages,
           st.partial_pool_pages, st.free_pool_pages, st.released_pool_pages, st.handles,
           st.cycles, small, large);
  lua_pushstring(L, line);
  return 1;
}

/* h.x = ... is always a mistake: a heap has methods, not fields. */
static int heap_newindex(lua_State *L) {
  char b[80];
  return fail(L, "heaplab.heap", "cannot set field %s (a heap has methods only)",
              shown(L, 2, b, sizeof b));
}

/* ---- objects (handles) ------------------------------------------------------------------- */

/* The object at idx: its heap userdata (pushed) and the open hl_heap.  An
 * error if released or if the heap was closed -- never a dangling use. */
static lobj *obj_check(lua_State *L, int idx, const char *fn, hl_heap **hp) {
  char b[80];
  lobj *o = luaL_testudata(L, idx, OBJ_MT);
  if (!o) {
    fail(L, fn, "expected a heaplab object as self (call it with ':'), got %s",
         shown(L, idx, b, sizeof b));
    return NULL;
  }
  lua_getiuservalue(L, idx, 1);
  lheap *lh = lua_touserdata(L, -1);
  lua_pop(L, 1); /* the object's user value keeps the heap alive */
  if (!lh || !lh->h) fail(L, fn, "the object's heap is closed");
  if (o->ref == 0) fail(L, fn, "the object was released");
  *hp = lh->h;
  return o;
}

static void obj_info(lua_State *L, const char *fn, hl_heap *h, lobj *o, hl_object_info *info) {
  heap_call(L, fn, h, hl_ref_info(h, o->ref, info));
}

/* The one finalizer of a handle: __gc, __close and o:release().  Drops the
 * root unless the heap is already gone (its handles went with it). */
static int obj_release_ud(lua_State *L, int idx) {
  lobj *o = luaL_testudata(L, idx, OBJ_MT);
  if (!o) return 0;
  hl_ref ref = o->ref;
  o->ref = 0;
  if (!ref) return 0;
  lua_getiuservalue(L, idx, 1);
  lheap *lh = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (lh && lh->h) hl_ref_release(lh->h, ref);
  return 0;
}

static int obj_gc(lua_State *L) { return obj_release_ud(L, 1); }

static int o_release(lua_State *L) {
  char b[80];
  if (!luaL_testudata(L, 1, OBJ_MT))
    return fail(L, "o:release", "expected a heaplab object as self (call it with ':'), got %s",
                shown(L, 1, b, sizeof b));
  return obj_release_ud(L, 1);
}

static int o_released(lua_State *L) {
  char b[80];
  lobj *o = luaL_testudata(L, 1, OBJ_MT);
  if (!o)
    return fail(L, "o:released", "expected a heaplab object as self, got %s",
                shown(L, 1, b, sizeof b));
  lua_pushboolean(L, o->ref == 0);
  return 1;
}

static int o_size(lua_State *L) {
  hl_heap *h;
  lobj *o = obj_check(L, 1, "o:size", &h);
  hl_object_info info;
  obj_info(L, "o:size", h, o, &info);
  lua_pushinteger(L, (lua_Integer)info.size);
  return 1;
}

static int o_refs(lua_State *L) {
  hl_heap *h;
  lobj *o = obj_check(L, 1, "o:refs", &h);
  hl_object_info info;
  obj_info(L, "o:refs", h, o, &info);
  lua_pushinteger(L, (lua_Integer)info.refs);
  return 1;
}

static int o_address(lua_State *L) {
  hl_heap *h;
  lobj *o = obj_check(L, 1, "o:address", &h);
  hl_object_info info;
  obj_info(L, "o:address", h, o, &info);
  lua_pushinteger(L, (lua_Integer)info.address);
  return 1;
}

static int o_large(lua_State *L) {
  hl_heap *h;
  lobj *o = obj_check(L, 1, "o:large", &h);
  hl_object_info info;
  obj_info(L, "o:large", h, o, &info);
  lua_pushboolean(L, info.large);
  return 1;
}

/* o:heap() -> the heap userdata this object belongs to */
static int o_heap(lua_State *L) {
  char b[80];
  if (!luaL_testudata(L, 1, OBJ_MT))
    return fail(L, "o:heap", "expected a heaplab object as self, got %s", shown(L, 1, b, sizeof b));
  lua_getiuservalue(L, 1, 1);
  return 1;
}

/* o:checksum() -> sum, objects over everything reachable from o (the sum is
 * a uint64 shown as a Lua integer, so it may be negative). */
static int o_checksum(lua_State *L) {
  hl_heap *h;
  lobj *o = obj_check(L, 1, "o:checksum", &h);
  uint64_t sum = 0, n = 0;
  heap_call(L, "o:checksum", h, hl_ref_checksum(h, o->ref, &sum, &n));
  lua_pushinteger(L, (lua_Integer)sum);
  lua_pushinteger(L, (lua_Integer)n);
  return 2;
}

/* o:dup() -> a second, independent root to the same object */
static int o_dup(lua_State *L) {
  hl_heap *h;
  lobj *o = obj_check(L, 1, "o:dup", &h);
  lua_getiuservalue(L, 1, 1);
  lobj *d = obj_new(L, -1);
  heap_call(L, "o:dup", h, hl_ref_dup(h, o->ref, &d->ref));
  return 1;
}

/* o:read(offset=0, length=size-offset) -> string */
static int o_read(lua_State *L) {
  static const char fn[] = "o:read";
  hl_heap *h;
  lobj *o = obj_check(L, 1, fn, &h);
  hl_object_info info;
  obj_info(L, fn, h, o, &info);
  uint64_t off = arg_uint(L, 2, fn, "offset", info.size, 0);
  uint64_t len = arg_uint(L, 3, fn, "length", info.size - off, (int64_t)(info.size - off));
  luaL_Buffer b;
  char *dst = luaL_buffinitsize(L, &b, (size_t)len);
  heap_call(L, fn, h, hl_ref_read(h, o->ref, off, dst, len));
  luaL_pushresultsize(&b, (size_t)len);
  return 1;
}

/* o:write(data, offset=0) */
static int o_write(lua_State *L) {
  static const char fn[] = "o:write";
  hl_heap *h;
  char bb[80];
  lobj *o = obj_check(L, 1, fn, &h);
  if (lua_type(L, 2) != LUA_TSTRING)
    return fail(L, fn, "data must be a string, got %s", shown(L, 2, bb, sizeof bb));
  size_t len = 0;
  const char *src = lua_tolstring(L, 2, &len);
  hl_object_info info;
  obj_info(L, fn, h, o, &info);
  uint64_t off = arg_uint(L, 3, fn, "offset", info.size, 0);
  if (len > info.size - off)
    return fail(L, fn, "%zu bytes at offset %" PRIu64 " do not fit a %" PRIu64 "-byte payload",
                len, off, info.size);
  heap_call(L, fn, h, hl_ref_write(h, o->ref, off, src, len));
  return 0;
}

/* A 1-based slot key at idx -> the 0-based C slot, checked against the object. */
static uint64_t slot_index(lua_State *L, int idx, const char *fn, hl_heap *h, lobj *o) {
  char b[80];
  int ok = 0;
  lua_Integer i = lua_tointegerx(L, idx, &ok);
  if (!ok || lua_type(L, idx) != LUA_TNUMBER)
    return (uint64_t)fail(L, fn, "slot index must be an integer, got %s",
                          shown(L, idx, b, sizeof b));
  hl_object_info info;
  obj_info(L, fn, h, o, &info);
  if (i < 1 || (uint64_t)i > info.refs)
    return (uint64_t)fail(L, fn, "slot index %lld out of range [1, %" PRIu64 "]", (long long)i,
                          info.refs);
  return (uint64_t)(i - 1);
}

/* Methods of an object, looked up by obj_index for string keys. */
static const luaL_Reg obj_methods[] = {
    {"release", o_release}, {"released", o_released}, {"size", o_size},   {"refs", o_refs},
    {"address", o_address}, {"large", o_large},       {"heap", o_heap},   {"checksum", o_checksum},
    {"dup", o_dup},         {"read", o_read},         {"write", o_write}, {NULL, NULL}};

/* o[i] -> object or nil (a NEW root to the slot's object); o.method -> method */
static int obj_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    return fail(L, "heaplab.object", "no method '%s' (methods: release, released, size, refs, "
                "address, large, heap, checksum, dup, read, write; o[i] for slots)",
                lua_tostring(L, 2));
  }
  static const char fn[] = "o[i]";
  hl_heap *h;
  lobj *o = obj_check(L, 1, fn, &h);
  uint64_t slot = slot_index(L, 2, fn, h, o);
  lua_getiuservalue(L, 1, 1);
  lobj *v = obj_new(L, -1);
  heap_call(L, fn, h, hl_ref_get(h, o->ref, slot, &v->ref));
  if (v->ref == 0) lua_pushnil(L);
  return 1;
}

/* o[i] = object or nil */
static int obj_newindex(lua_State *L) {
  static const char fn[] = "o[i] = v";
  char b[80];
  hl_heap *h;
  lobj *o = obj_check(L, 1, fn, &h);
  if (lua_type(L, 2) == LUA_TSTRING)
    return fail(L, fn, "cannot set field '%s' (an object has slots o[1..#o], not fields)",
                lua_tostring(L, 2));
  uint64_t slot = slot_index(L, 2, fn, h, o);
  hl_ref value = 0;
  if (!lua_isnil(L, 3)) {
    lobj *v = luaL_testudata(L, 3, OBJ_MT);
    if (!v) return fail(L, fn, "v must be a heaplab object or nil, got %s", shown(L, 3, b, sizeof b));
    lua_getiuservalue(L, 1, 1);
    lua_getiuservalue(L, 3, 1);
    int same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if (!same) return fail(L, fn, "v belongs to another heap");
    if (v->ref == 0) return fail(L, fn, "v was released");
    value = v->ref;
  }
  heap_call(L, fn, h, hl_ref_set(h, o->ref, slot, value));
  return 0;
}

static int obj_len(lua_State *L) {
  hl_heap *h;
  lobj *o = obj_check(L, 1, "#o", &h);
  hl_object_info info;
  obj_info(L, "#o", h, o, &info);
  lua_pushinteger(L, (lua_Integer)info.refs);
  return 1;
}

/* Two handles are equal when they root the same object of the same heap. */
static int obj_eq(lua_State *L) {
  lobj *a = luaL_testudata(L, 1, OBJ_MT), *b = luaL_testudata(L, 2, OBJ_MT);
  if (!a || !b || !a->ref || !b->ref) {
    lua_pushboolean(L, lua_rawequal(L, 1, 2));
    return 1;
  }
  lua_getiuservalue(L, 1, 1);
  lua_getiuservalue(L, 2, 1);
  lheap *lh = lua_touserdata(L, -1);
  int same_heap = lua_rawequal(L, -1, -2);
  lua_pop(L, 2);
  hl_object_info ia, ib;
  lua_pushboolean(L, same_heap && lh && lh->h && !hl_ref_info(lh->h, a->ref, &ia) &&
                         !hl_ref_info(lh->h, b->ref, &ib) && ia.object == ib.object);
  return 1;
}

static int obj_tostring(lua_State *L) {
  lobj *o = luaL_checkudata(L, 1, OBJ_MT);
  lua_getiuservalue(L, 1, 1);
  lheap *lh = lua_touserdata(L, -1);
  lua_pop(L, 1);
  hl_object_info info;
  if (o->ref == 0)
    lua_pushstring(L, "heaplab.object (released)");
  else if (!lh || !lh->h)
    lua_pushstring(L, "heaplab.object (heap closed)");
  else if (hl_ref_info(lh->h, o->ref, &info))
    lua_pushstring(L, "heaplab.object (stale)");
  else {
    char line[160];
    snprintf(line, sizeof line, "heaplab.object(size=%" PRIu64 ", refs=%" PRIu64 "%s): 0x%" PRIx64,
             info.size, info.refs, info.large ? ", large" : "", info.address);
    lua_pushstring(L, line);
  }
  return 1;
}

/* ---- the footprint sampler ------------------------------------------------------------------ */

static hl_sampler *sampler_check(lua_State *L, const char *fn) {
  char b[80];
  lsampler *ls = luaL_testudata(L, 1, SAMPLER_MT);
  if (!ls) fail(L, fn, "expected a sampler as self (call it with ':'), got %s", shown(L, 1, b, sizeof b));
  if (!ls->s) fail(L, fn, "the sampler is stopped");
  return ls->s;
}

/* heaplab.sampler(interval_s=0.002, capacity=65536): a C thread sampling
 * this process's footprint (peak, lowest after mark, time series). */
static int l_sampler(lua_State *L) {
  static const char fn[] = "heaplab.sampler";
  double interval = lua_isnoneornil(L, 1) ? 0.002 : arg_number(L, 1, fn, "interval_s");
  if (!(interval >= 0.0001 && interval <= 10))
    return fail(L, fn, "interval_s must be in [0.0001, 10] seconds, got %g", interval);
  uint64_t cap = arg_uint(L, 2, fn, "capacity", 1u << 24, 65536);
  if (cap < 16) return fail(L, fn, "capacity must be in [16, 16777216], got %" PRIu64, cap);
  lsampler *ls = lua_newuserdatauv(L, sizeof *ls, 0);
  ls->s = NULL;
  luaL_setmetatable(L, SAMPLER_MT);
  int rc = hl_sampler_start(&ls->s, (uint32_t)llround(interval * 1e6), (size_t)cap);
  if (rc) return fail(L, fn, "cannot start the sampler thread (%s)", hl_error_name(rc));
  return 1;
}

static int sampler_stop(lua_State *L) {
  lsampler *ls = luaL_checkudata(L, 1, SAMPLER_MT);
  hl_sampler *s = ls->s;
  ls->s = NULL;
  hl_sampler_stop(s);
  return 0;
}

static int s_stop(lua_State *L) {
  char b[80];
  if (!luaL_testudata(L, 1, SAMPLER_MT))
    return fail(L, "s:stop", "expected a sampler as self, got %s", shown(L, 1, b, sizeof b));
  return sampler_stop(L);
}

static int s_mark(lua_State *L) {
  hl_sampler_mark(sampler_check(L, "s:mark"));
  return 0;
}

static int s_reset(lua_State *L) {
  hl_sampler_reset(sampler_check(L, "s:reset"));
  return 0;
}

static int s_summary(lua_State *L) {
  hl_sampler_summary o;
  hl_sampler_summary_get(sampler_check(L, "s:summary"), &o);
  lua_createtable(L, 0, 10);
#define F(name)                                                                \
  lua_pushinteger(L, (lua_Integer)o.name);                                     \
  lua_setfield(L, -2, #name);
  F(samples) F(min_phys) F(max_phys) F(min_phys_after_mark) F(max_phys_after_mark) F(min_rss)
  F(max_rss) F(mark_ns) F(interval_us) F(stored)
#undef F
  return 1;
}

/* s:series(start=1) -> { {t_ns, phys_footprint, rss, lazyfree}, ... } */
static int s_series(lua_State *L) {
  static const char fn[] = "s:series";
  hl_sampler *s = sampler_check(L, fn);
  uint64_t start = arg_uint(L, 2, fn, "start", UINT64_MAX >> 1, 1);
  if (start < 1) return fail(L, fn, "start must be >= 1, got 0");
  enum { CHUNK = 1024 };
  hl_sample *buf = lua_newuserdatauv(L, CHUNK * sizeof *buf, 0);
  lua_newtable(L);
  lua_Integer out = 0;
  size_t from = (size_t)(start - 1), n = 0;
  do {
    hl_sampler_read(s, from, buf, CHUNK, &n);
    for (size_t i = 0; i < n; i++) {
      lua_createtable(L, 4, 0);
      lua_pushinteger(L, (lua_Integer)buf[i].t_ns);
      lua_rawseti(L, -2, 1);
      lua_pushinteger(L, (lua_Integer)buf[i].phys_footprint);
      lua_rawseti(L, -2, 2);
      lua_pushinteger(L, (lua_Integer)buf[i].rss);
      lua_rawseti(L, -2, 3);
      lua_pushinteger(L, (lua_Integer)buf[i].lazyfree);
      lua_rawseti(L, -2, 4);
      lua_rawseti(L, -2, ++out);
    }
    from += n;
  } while (n == CHUNK);
  return 1;
}

static int sampler_tostring(lua_State *L) {
  lsampler *ls = luaL_checkudata(L, 1, SAMPLER_MT);
  if (!ls->s) {
    lua_pushstring(L, "heaplab.sampler (stopped)");
    return 1;
  }
  hl_sampler_summary o;
  hl_sampler_summary_get(ls->s, &o);
  char line[200], lo[32], hi[32];
  push_mib(lo, sizeof lo, o.min_phys);
  push_mib(hi, sizeof hi, o.max_phys);
  snprintf(line, sizeof line, "heaplab.sampler(every %" PRIu64 " us): %" PRIu64
           " samples, phys %s .. %s", o.interval_us, o.samples, lo, hi);
  lua_pushstring(L, line);
  return 1;
}

/* ---- registration ---------------------------------------------------------------------------- */

static const luaL_Reg heap_methods[] = {
    {"alloc", h_alloc},
    {"fill", h_fill},
    {"collect", h_collect},
    {"stats", h_stats},
    {"events", h_events},
    {"resident_bytes", h_resident_bytes},
    {"vma_count", h_vma_count},
    {"inject", h_inject},
    {"faults", h_faults},
    {"close", h_close},
    {"closed", h_closed},
    {"trim", h_trim},
    {"check", h_check},
    {"churn", h_churn},
    {"memory_pressure", h_memory_pressure},
    {"options", h_options},
    {"range", h_range},
    {NULL, NULL}};

/* h.method; an unknown name is an error naming it (a typo must not be nil). */
static int heap_index(lua_State *L) {
  if (lua_type(L, 2) == LUA_TSTRING) {
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) != LUA_TNIL) return 1;
    return fail(L, "heaplab.heap", "no method '%s' (methods: alloc, fill, collect, stats, events, "
                "resident_bytes, vma_count, inject, faults, close, closed, trim, check, churn, "
                "memory_pressure, options, range)", lua_tostring(L, 2));
  }
  char b[80];
  return fail(L, "heaplab.heap", "no field %s (a heap has methods only)", shown(L, 2, b, sizeof b));
}

static const luaL_Reg sampler_methods[] = {
    {"mark", s_mark},     {"reset", s_reset}, {"summary", s_summary},
    {"series", s_series}, {"stop", s_stop},   {NULL, NULL}};

static const luaL_Reg module_functions[] = {
    {"heap", l_heap},
    {"options", l_options},
    {"footprint", l_footprint},
    {"sampler", l_sampler},
    {"stat_names", l_stat_names},
    {"fault_sites", l_fault_sites},
    {"fault_modes", l_fault_modes},
    {"clock_ns", l_clock_ns},
    {"pid", l_pid},
    {NULL, NULL}};

/* Make metatable `name` with the finalizer on __gc and __close, and __index
 * a closure over the method table (string keys) or the method table itself. */
static void new_type(lua_State *L, const char *name, const luaL_Reg *methods,
                     lua_CFunction finalizer, lua_CFunction tostring, lua_CFunction index) {
  luaL_newmetatable(L, name);
  lua_pushcfunction(L, finalizer);
  lua_setfield(L, -2, "__gc");
  lua_pushcfunction(L, finalizer);
  lua_setfield(L, -2, "__close");
  lua_pushcfunction(L, tostring);
  lua_setfield(L, -2, "__tostring");
  lua_newtable(L);
  luaL_setfuncs(L, methods, 0);
  if (index) lua_pushcclosure(L, index, 1);
  lua_setfield(L, -2, "__index");
}

/* The only exported symbol (heaplab_lua.map): require "heaplab" calls it. */
__attribute__((visibility("default"))) int luaopen_heaplab(lua_State *L);

int luaopen_heaplab(lua_State *L) {
  new_type(L, HEAP_MT, heap_methods, heap_close, heap_tostring, heap_index);
  lua_pushcfunction(L, heap_newindex);
  lua_setfield(L, -2, "__newindex");
  lua_pop(L, 1);

  new_type(L, OBJ_MT, obj_methods, obj_gc, obj_tostring, obj_index);
  lua_pushcfunction(L, obj_newindex);
  lua_setfield(L, -2, "__newindex");
  lua_pushcfunction(L, obj_len);
  lua_setfield(L, -2, "__len");
  lua_pushcfunction(L, obj_eq);
  lua_setfield(L, -2, "__eq");
  lua_pop(L, 1);

  new_type(L, SAMPLER_MT, sampler_methods, sampler_stop, sampler_tostring, NULL);
  lua_pop(L, 1);

  luaL_newlib(L, module_functions);
  lua_pushstring(L, hl_version());
  lua_setfield(L, -2, "version");
  lua_pushinteger(L, (lua_Integer)hl_max_size());
  lua_setfield(L, -2, "MAX_SIZE");
  lua_pushinteger(L, (lua_Integer)hl_max_refs());
  lua_setfield(L, -2, "MAX_REFS");
  return 1;
}
