/*
 * sampler.c -- heaplab.sampler: the footprint sampler (hl_sampler_*) for
 * experiments written in Lua: a C thread reading phys_footprint and rss,
 * keeping the peak, the lowest value after a mark, and a time series.
 * One finalizer (lhl_sampler_finalize) serves __gc, __close and s:stop().
 */
/*** @submodule heaplab */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>

#include "lhl.h"

static hl_sampler *sampler_check(lua_State *L, const char *fn) {
  char b[80];
  lsampler *ls = lhl_sampler_at(L, 1);
  if (!ls) lhl_fail(L, fn, "expected a sampler as self (call it with ':'), got %s",
                    lhl_shown(L, 1, b, sizeof b));
  if (!ls->s) lhl_fail(L, fn, "the sampler is stopped");
  return ls->s;
}

/***
A footprint sampler: a C thread reading phys_footprint and rss every `interval_s`.
@function sampler
@tparam[opt=0.002] number interval_s
@tparam[opt=65536] integer capacity samples kept in the series
@treturn sampler
@return nil, message, code when the thread cannot start
*/
/* heaplab.sampler(interval_s=0.002, capacity=65536): a C thread sampling
 * this process's footprint (peak, lowest after mark, time series). */
int lhl_sampler_new(lua_State *L) {
  static const char fn[] = "heaplab.sampler";
  double interval = lua_isnoneornil(L, 1) ? 0.002 : lhl_arg_number(L, 1, fn, "interval_s");
  if (lhl_beyond_int64(L, 2)) /* (never reaches hl_sampler_open: its range, as it says it) */
    return lhl_fail_beyond(L, 2, fn, "capacity", HL_SAMPLER_MIN_CAPACITY, HL_SAMPLER_MAX_CAPACITY);
  int64_t cap = lua_isnoneornil(L, 2) ? 65536 : lhl_arg_int(L, 2, fn, "capacity");
  lsampler *ls = lua_newuserdatauv(L, sizeof *ls, 0);
  ls->tag = LHL_TAG_SAMPLER;
  ls->s = NULL;
  lhl_setmetatable(L, SAMPLER_MT);
  int rc = hl_sampler_open(&ls->s, interval, cap);
  if (rc) {
    char msg[300];
    lhl_rc_text(msg, sizeof msg, fn, hl_heap_error(NULL), rc);
    if (lhl_is_failure(rc)) return lhl_push_failure(L, msg, rc);
    return luaL_error(L, "%s", msg);
  }
  /* Lua's collector sees 8 bytes of userdata, not a thread sampling every
   * interval and its series (capacity samples of 32 bytes): 300 dropped
   * samplers left ~100 threads running until collectgarbage().  Tell it, as
   * heaplab.heap does: a step as if the series and the thread's stack had
   * been allocated (not when the program stopped the collector). */
  if (lua_gc(L, LUA_GCISRUNNING))
    lua_gc(L, LUA_GCSTEP, (int)(((uint64_t)cap * sizeof(hl_sample) + HL_SAMPLER_THREAD_COST) >> 10));
  return 1;
}

/* The one finalizer: __gc, __close (lhl_finalize) and s:stop(). */
int lhl_sampler_finalize(lua_State *L) {
  lsampler *ls = lhl_sampler_at(L, 1);
  if (!ls) return 0;
  hl_sampler *s = ls->s;
  ls->s = NULL;
  hl_sampler_stop(s);
  return 0;
}

/***
The footprint sampler (`sampler`).  Also stopped by `__gc` and `__close`.
@type sampler
*/

/***
Stop the thread.  Idempotent.
@function sampler:stop
@treturn boolean true
*/
static int s_stop(lua_State *L) {
  char b[80];
  if (!lhl_sampler_at(L, 1))
    return lhl_fail(L, "s:stop",
                    "expected a sampler as self, got %s", lhl_shown(L, 1, b, sizeof b));
  lhl_sampler_finalize(L);
  lua_pushboolean(L, 1); /* (methods with nothing to return return true) */
  return 1;
}

/***
Start the "lowest after the mark" window.
@function sampler:mark
@treturn boolean true
*/
static int s_mark(lua_State *L) {
  hl_sampler_mark(sampler_check(L, "s:mark"));
  lua_pushboolean(L, 1);
  return 1;
}

/***
Start a new phase: the overall minimum and maximum and the sample count
restart, the after-mark window ends until the next mark; the series is kept.
@function sampler:reset
@treturn boolean true
*/
static int s_reset(lua_State *L) {
  hl_sampler_reset(sampler_check(L, "s:reset"));
  lua_pushboolean(L, 1);
  return 1;
}

/***
What was sampled.  `interval_us` is the interval the sampler was opened
with, which its thread keeps; `stored` the samples in the series, which
thins out once full (docs/lua.md, The sampler).
@function sampler:summary
@treturn table `{samples, min_phys, max_phys, min_phys_after_mark, max_phys_after_mark,
min_rss, max_rss, mark_ns, interval_us, stored}` (`tostring` shows them)
@return nil, message, code when no sample was taken because every read failed (no file
descriptor left, no /proc): the message names the file and the reason
*/
static int s_summary(lua_State *L) {
  hl_sampler_summary o;
  int rc = hl_sampler_summary_get(sampler_check(L, "s:summary"), &o);
  if (rc) { /* every read failed: no figures (heaplab.h) */
    char msg[300];
    snprintf(msg, sizeof msg, "s:summary: %s", hl_heap_error(NULL));
    return lhl_push_failure(L, msg, rc);
  }
  lua_createtable(L, 0, 10);
  lhl_setmetatable(L, SUMMARY_MT);
#define F(name)                                                                \
  lua_pushinteger(L, (lua_Integer)o.name);                                     \
  lua_setfield(L, -2, #name);
  LHL_SUMMARY_FIELDS(F)
#undef F
  return 1;
}

/* s:series(start=1) -> { {t_ns, phys_footprint, rss, lazyfree}, ... } */
/***
The samples kept.
@function sampler:series
@tparam[opt=1] integer start the first sample
@treturn table `{ {t_ns, phys, rss, lazyfree}, ... }` (`tostring` shows a line a sample)
*/
static int s_series(lua_State *L) {
  static const char fn[] = "s:series";
  hl_sampler *s = sampler_check(L, fn);
  uint64_t start = lhl_arg_range(L, 2, fn, "start", 1, UINT64_MAX >> 1, 1);
  enum { CHUNK = 1024 };
  hl_sample *buf = lua_newuserdatauv(L, CHUNK * sizeof *buf, 0);
  lua_newtable(L);
  lhl_setmetatable(L, SERIES_MT);
  lua_Integer out = 0;
  size_t from = (size_t)(start - 1), n = 0;
  do {
    /* every table made below may run a finalizer that stops the sampler:
     * look it up again before each read (an error if it was stopped) */
    s = sampler_check(L, fn);
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
  lsampler *ls = lhl_sampler_at(L, 1);
  if (!ls) return lhl_tostring_other(L, SAMPLER_MT);
  if (!ls->s) {
    lua_pushstring(L, "heaplab.sampler (stopped)");
    return 1;
  }
  hl_sampler_summary o;
  hl_sampler_summary_get(ls->s, &o);
  char line[200], lo[32], hi[32];
  lhl_mib(lo, sizeof lo, o.min_phys);
  lhl_mib(hi, sizeof hi, o.max_phys);
  snprintf(line, sizeof line, "heaplab.sampler(every %" PRIu64 " us): %" PRIu64
           " samples, phys %s .. %s", o.interval_us, o.samples, lo, hi);
  lua_pushstring(L, line);
  return 1;
}

static const luaL_Reg sampler_methods[] = {
    {"mark", s_mark},     {"reset", s_reset}, {"summary", s_summary},
    {"series", s_series}, {"stop", s_stop},   {NULL, NULL}};

/* s.x = ... is always a mistake, said as a heap's and an object's is
 * (it was Lua's "attempt to index a heaplab.sampler value"). */
static int sampler_newindex(lua_State *L) {
  char b[80];
  return lhl_fail(L, "heaplab.sampler", "cannot set field %s (a sampler has methods only)",
                  lhl_shown(L, 2, b, sizeof b));
}

static const luaL_Reg sampler_meta[] = {
    {"__gc", lhl_finalize},         {"__close", lhl_finalize},
    {"__tostring", sampler_tostring}, {"__newindex", sampler_newindex},
    {NULL, NULL}};

void lhl_open_sampler(lua_State *L) {
  lhl_new_type(L, SAMPLER_MT, sampler_meta, sampler_methods, NULL);
  lua_pop(L, 1);
}
