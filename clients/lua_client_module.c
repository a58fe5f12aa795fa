/*
 * lua_client_module.c -- `require "heaplab.client"` inside heaplab-lua: the
 * launcher's own heap and the process footprint, seen from the script, so a
 * real Lua program can measure itself (E8 records its phases with it).
 *
 *   local c = require "heaplab.client"
 *   c.allocator()                 "heaplab" or "libc"
 *   c.stats(), c.options()        tables by name (nil on libc)
 *   c.resident_bytes(), c.vma_count()   the heap's reservation (nil on libc)
 *   c.footprint()                 {rss, anonymous, lazyfree, swap, phys_footprint, anon_huge}
 *   c.trim()                      run a trim pass now (nil on libc)
 *   c.flush()                     return this thread's cached blocks
 *   c.now()                       CLOCK_MONOTONIC, seconds
 *   c.peak_rss()                  bytes
 *   c.report()                    the HEAPLAB_STATS JSON, as a string
 *   local s <close> = c.sampler(interval_s)   s:mark() s:reset() s:summary() s:series() s:stop()
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "../bindings/lua/lhl_int64.h"
#include "../bindings/lua/lhl_shown.h" /* (the module's messages' values, header-only: this
                                        * launcher links no other part of the module) */
#include "client.h"

#define SAMPLER "heaplab.client.sampler"

static int c_allocator(lua_State *L) {
  lua_pushstring(L, client.allocator);
  return 1;
}

static int c_stats(lua_State *L) {
  if (!client.heap) return 0;
  hl_stats st;
  hl_stats_get(client.heap, &st);
  const uint64_t *field = (const uint64_t *)&st;
  lua_createtable(L, 0, hl_stat_count());
  for (int i = 0; i < hl_stat_count(); i++) {
    lua_pushinteger(L, (lua_Integer)field[i]);
    lua_setfield(L, -2, hl_stat_name(i));
  }
  return 1;
}

static int c_options(lua_State *L) {
  if (!client.heap) return 0;
  hl_options o;
  hl_heap_options(client.heap, &o);
  lua_createtable(L, 0, hl_option_count());
  for (int i = 0; i < hl_option_count(); i++) {
    hl_option_info info;
    int64_t v = 0;
    hl_option_info_get(i, &info);
    hl_options_get(&o, info.name, &v);
    if (info.kind == HL_OPT_BOOL) lua_pushboolean(L, v != 0);
    else if (info.kind == HL_OPT_ENUM) lua_pushstring(L, hl_option_choice(i, v));
    else lua_pushinteger(L, (lua_Integer)v);
    lua_setfield(L, -2, info.name);
  }
  return 1;
}

static int c_resident_bytes(lua_State *L) {
  uint64_t v;
  if (!client.heap || hl_resident_bytes(client.heap, &v)) return 0;
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

static int c_vma_count(lua_State *L) {
  uint64_t v;
  if (!client.heap || hl_vma_count(client.heap, &v)) return 0;
  lua_pushinteger(L, (lua_Integer)v);
  return 1;
}

static int c_footprint(lua_State *L) {
  hl_footprint f;
  if (hl_footprint_get(&f)) return luaL_error(L, "%s", hl_heap_error(NULL)); /* (file, reason) */
  lua_createtable(L, 0, 6);
  lua_pushinteger(L, (lua_Integer)f.rss), lua_setfield(L, -2, "rss");
  lua_pushinteger(L, (lua_Integer)f.anonymous), lua_setfield(L, -2, "anonymous");
  lua_pushinteger(L, (lua_Integer)f.lazyfree), lua_setfield(L, -2, "lazyfree");
  lua_pushinteger(L, (lua_Integer)f.swap), lua_setfield(L, -2, "swap");
  lua_pushinteger(L, (lua_Integer)f.phys_footprint), lua_setfield(L, -2, "phys_footprint");
  lua_pushinteger(L, (lua_Integer)f.anon_huge), lua_setfield(L, -2, "anon_huge");
  return 1;
}

static int c_trim(lua_State *L) {
  if (!client.heap) return 0;
  hl_thread_flush(client.heap);
  hl_trim(client.heap);
  lua_pushboolean(L, 1);
  return 1;
}

static int c_flush(lua_State *L) {
  (void)L;
  if (client.heap) hl_thread_flush(client.heap);
  return 0;
}

static int c_now(lua_State *L) {
  lua_pushnumber(L, client_now_ns() / 1e9);
  return 1;
}

static int c_peak_rss(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)client_peak_rss());
  return 1;
}

static int c_report(lua_State *L) {
  client_out out = {0};
  if (client_write_report(&out) != 0) {
    client_out_free(&out);
    return luaL_error(L, "report: out of memory");
  }
  lua_pushlstring(L, out.buf, out.len);
  client_out_free(&out);
  return 1;
}

/* ---- the footprint sampler: a C thread, so it samples while Lua runs ---- */

/* A sampler is this module's by its first word and its size, never by its
 * metatable alone: luaL_checkudata took any userdata debug.setmetatable gave
 * the sampler's metatable (io.stdout:mark() ran hl_sampler_mark on a FILE *:
 * SIGSEGV), as the heaplab module's values are told apart (lhl.h). */
#define SAMPLER_TAG 0x732e6c632e6c68ULL /* "hl.cl.s" */

typedef struct sampler_ud {
  uint64_t tag;  /* SAMPLER_TAG */
  hl_sampler *s; /* NULL once stopped */
} sampler_ud;

static sampler_ud *sampler_at(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TUSERDATA || lua_rawlen(L, idx) != sizeof(sampler_ud)) return NULL;
  sampler_ud *u = lua_touserdata(L, idx);
  return u->tag == SAMPLER_TAG ? u : NULL;
}

static sampler_ud *check_ud(lua_State *L) {
  sampler_ud *u = sampler_at(L, 1);
  if (u) return u;
  /* (luaL_typeerror names a userdata by its metatable's __name: "sampler
   * expected, got sampler" for one given ours) */
  if (lua_type(L, 1) == LUA_TUSERDATA && luaL_getmetafield(L, 1, "__name") == LUA_TSTRING &&
      strcmp(lua_tostring(L, -1), SAMPLER) == 0)
    luaL_argerror(L, 1, SAMPLER " expected, got another userdata with its metatable");
  luaL_typeerror(L, 1, SAMPLER);
  return NULL;
}

static hl_sampler *check_sampler(lua_State *L) {
  sampler_ud *u = check_ud(L);
  if (!u->s) luaL_error(L, "sampler is stopped");
  return u->s;
}

static int s_mark(lua_State *L);
static int s_reset(lua_State *L);
static int s_summary(lua_State *L);
static int s_series(lua_State *L);
static int s_stop(lua_State *L);
static int s_finalize(lua_State *L);

static const luaL_Reg sampler_methods[] = {
  {"mark", s_mark}, {"reset", s_reset}, {"summary", s_summary}, {"series", s_series},
  {"stop", s_stop}, {NULL, NULL},
};

static const luaL_Reg sampler_metamethods[] = {
  {"__gc", s_finalize}, {"__close", s_finalize}, {NULL, NULL},
};

/* Push the samplers' metatable: the registry's entry when it is still ours
 * (read raw: a table whose __name is SAMPLER and whose __gc is s_finalize), else
 * a new one, put there (raw).  debug.getregistry()[SAMPLER] = 42 made the
 * next c.sampler() set 42 as a metatable (SIGSEGV); = {} gave samplers no
 * methods and no __gc (their threads ran on).  Values made before keep
 * theirs. */
static void sampler_metatable(lua_State *L) {
  lua_pushliteral(L, SAMPLER);
  if (lua_rawget(L, LUA_REGISTRYINDEX) == LUA_TTABLE) {
    lua_pushliteral(L, "__name");
    int name = lua_rawget(L, -2) == LUA_TSTRING && strcmp(lua_tostring(L, -1), SAMPLER) == 0;
    lua_pushliteral(L, "__gc");
    lua_rawget(L, -3);
    int ours = name && lua_tocfunction(L, -1) == s_finalize;
    lua_pop(L, 2);
    if (ours) return;
  }
  lua_pop(L, 1);
  lua_createtable(L, 0, 4);
  lua_pushliteral(L, SAMPLER);
  lua_setfield(L, -2, "__name");
  luaL_setfuncs(L, sampler_metamethods, 0);
  luaL_newlib(L, sampler_methods);
  lua_setfield(L, -2, "__index");
  lua_pushliteral(L, SAMPLER);
  lua_pushvalue(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
}

/* client.sampler(interval_s = 0.002, capacity = 65536) */
static int c_sampler(lua_State *L) {
  char b[80];
  /* a number is a number, as the module's heaplab.sampler has it: a string
   * is none ("0.01" and a capacity "16" were taken, luaL_optnumber's and
   * luaL_optinteger's conversion; a boolean said "bad argument #1 to
   * 'heaplab.client.sampler' (number expected, got boolean)") -- session 43 */
  if (!lua_isnoneornil(L, 1) && lua_type(L, 1) != LUA_TNUMBER)
    return luaL_error(L, SAMPLER ": interval_s must be a number, got %s",
                      lhl_shown_value(L, 1, b, sizeof b));
  lua_Number interval = lua_isnoneornil(L, 1) ? 0.002 : lua_tonumber(L, 1);
  /* an integral float beyond the 64-bit integers (1e300) is a capacity out
   * of range, as in the module (docs/lua.md), not Lua's "number has no
   * integer representation" -- the range hl_sampler_open checks, as the
   * module names it (session 44) */
  if (lhl_beyond_int64(L, 2))
    return luaL_error(L, SAMPLER ": capacity %s out of range [%d, %d]", luaL_tolstring(L, 2, NULL),
                      HL_SAMPLER_MIN_CAPACITY, HL_SAMPLER_MAX_CAPACITY);
  int isint = 0;
  lua_Integer cap = lua_isnoneornil(L, 2) ? 1 << 16 : lua_tointegerx(L, 2, &isint);
  if (!lua_isnoneornil(L, 2) && (lua_type(L, 2) != LUA_TNUMBER || !isint))
    return luaL_error(L, SAMPLER ": capacity must be an integer, got %s",
                      lhl_shown_value(L, 2, b, sizeof b));
  sampler_ud *u = lua_newuserdatauv(L, sizeof *u, 0);
  u->tag = SAMPLER_TAG;
  u->s = NULL; /* closed until started, so __gc is always safe */
  sampler_metatable(L);
  lua_setmetatable(L, -2);
  if (hl_sampler_open(&u->s, (double)interval, (int64_t)cap))
    return luaL_error(L, "%s", hl_heap_error(NULL));
  /* Lua's collector sees 16 bytes, not a thread and its series: dropped
   * samplers were stopped only when other allocations happened to run a
   * collection (200 dropped ones: 200 threads).  Step it as if the series
   * and the thread (the module's heaplab.sampler counts the same) had been
   * allocated -- not when the program stopped the collector (a step runs
   * it, finalizers included, as the module's heaplab.sampler says). */
  if (lua_gc(L, LUA_GCISRUNNING))
    lua_gc(L, LUA_GCSTEP, (int)(((uint64_t)cap * sizeof(hl_sample) + HL_SAMPLER_THREAD_COST) >> 10));
  return 1;
}

static int s_mark(lua_State *L) {
  hl_sampler_mark(check_sampler(L));
  return 0;
}

static int s_reset(lua_State *L) {
  hl_sampler_reset(check_sampler(L));
  return 0;
}

static int s_summary(lua_State *L) {
  hl_sampler_summary m;
  if (hl_sampler_summary_get(check_sampler(L), &m)) return luaL_error(L, "%s", hl_heap_error(NULL));
  lua_createtable(L, 0, 10);
#define F(name) lua_pushinteger(L, (lua_Integer)m.name), lua_setfield(L, -2, #name)
  F(samples); F(min_phys); F(max_phys); F(min_phys_after_mark); F(max_phys_after_mark);
  F(min_rss); F(max_rss); F(mark_ns); F(interval_us); F(stored);
#undef F
  return 1;
}

/* {{t_ns, phys_footprint, rss, lazyfree}, ...} */
static int s_series(lua_State *L) {
  check_sampler(L);
  hl_sample buf[256];
  size_t from = 0, n;
  lua_newtable(L);
  lua_Integer k = 1;
  /* each table made may run a finalizer that stops the sampler: look it up
   * again before each read (an error once stopped, not a freed sampler) */
  while (hl_sampler_read(check_sampler(L), from, buf, 256, &n) == 0 && n > 0) {
    for (size_t i = 0; i < n; i++) {
      lua_createtable(L, 4, 0);
      lua_pushinteger(L, (lua_Integer)buf[i].t_ns), lua_rawseti(L, -2, 1);
      lua_pushinteger(L, (lua_Integer)buf[i].phys_footprint), lua_rawseti(L, -2, 2);
      lua_pushinteger(L, (lua_Integer)buf[i].rss), lua_rawseti(L, -2, 3);
      lua_pushinteger(L, (lua_Integer)buf[i].lazyfree), lua_rawseti(L, -2, 4);
      lua_rawseti(L, -2, k++);
    }
    from += n;
  }
  return 1;
}

/* The one idempotent finalizer of a sampler: __gc and __close, which do
 * nothing to a value that is no sampler of ours (given the metatable by
 * debug.setmetatable), and s:stop(), for which that is an error. */
static int s_finalize(lua_State *L) {
  sampler_ud *u = sampler_at(L, 1);
  if (u && u->s) hl_sampler_stop(u->s);
  if (u) u->s = NULL;
  return 0;
}

static int s_stop(lua_State *L) {
  check_ud(L);
  return s_finalize(L);
}

static const luaL_Reg functions[] = {
  {"allocator", c_allocator}, {"stats", c_stats}, {"options", c_options},
  {"resident_bytes", c_resident_bytes}, {"vma_count", c_vma_count},
  {"footprint", c_footprint}, {"trim", c_trim}, {"flush", c_flush}, {"now", c_now},
  {"peak_rss", c_peak_rss}, {"report", c_report}, {"sampler", c_sampler}, {NULL, NULL},
};

int luaopen_heaplab_client(lua_State *L) {
  sampler_metatable(L);
  lua_pop(L, 1);
  luaL_newlib(L, functions);
  return 1;
}
