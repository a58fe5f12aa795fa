/*
 * heaplab_lua.c -- the Lua 5.4 module: local heaplab = require "heaplab".
 *
 * A thin layer over libheaplab (heaplab.h); no policy lives here.  Option
 * names, kinds and ranges, stat names, event fields and fault sites are read
 * from the C declarations (hl_option_info_get, hl_stat_name, ...), never
 * retyped.  DESIGN.md section 2 (Lua) is the contract; docs/lua.md the guide.
 *
 * This file is the module table: the declarations, the process-wide probes
 * and luaopen_heaplab.  The three userdata types live one per file (heap.c,
 * object.c, sampler.c), each built the liolib way: created in a safe
 * "closed" state BEFORE anything is acquired (so an error half-way leaks
 * nothing), one idempotent finalizer serving both __gc and __close, methods
 * reached through __index.
 *
 * Errors are Lua errors whose message names the function, the argument and
 * what was wrong ("h:alloc: size must be >= 0, got -1"; args.c).  Nothing
 * here may crash on bad input: every argument is checked before it reaches
 * C, and C's own error codes become Lua errors with hl_heap_error's message.
 */
/***
heaplab from Lua 5.4: `local heaplab = require "heaplab"`.

A thin layer over libheaplab: heaps (`heaplab.heap`), object handles, fault injection,
events and a footprint sampler.  Option names, stat names, event fields and fault sites
come from the C declarations.  docs/lua.md is the guide.

Errors follow liolib's convention.  When the operation itself fails -- memory or the
reservation exhausted ("ENOMEM"), a system call refused ("ESYS"), a heap invariant broken
("ECHECK") -- a function returns nil, a message and the code's name, so
`assert(h:fill(...))` raises with the message and `local r, msg, code = h:fill(...)` lets a
program decide.  Bad arguments, handles that were released, a closed heap or a heap of the
wrong mode are raised with `error()`: those are mistakes in the program.  Functions without
a result return true on success.

@module heaplab
@release 0.1.0
*/

/*** The C library's version, e.g. "0.1.0".
@field version
*/

/*** "heaplab " .. version, as Lua modules name themselves: "heaplab 0.1.0".
@field _VERSION
*/

/*** The largest payload an object may have, in bytes.
@field MAX_SIZE
*/

/*** The most slots an object may have.
@field MAX_REFS
*/
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lhl.h"

/* ---- declarations read from C ------------------------------------------------------ */

static const char *kind_name(int kind) {
  switch (kind) {
  case HL_OPT_BOOL: return "bool";
  case HL_OPT_INT: return "int";
  case HL_OPT_BYTES: return "bytes";
  default: return "enum";
  }
}

/* An option's value as Lua shows it: boolean, choice name or integer. */
void lhl_push_option_value(lua_State *L, int index, const hl_option_info *info, int64_t v) {
  if (info->kind == HL_OPT_BOOL)
    lua_pushboolean(L, v != 0);
  else if (info->kind == HL_OPT_ENUM)
    lua_pushstring(L, hl_option_choice(index, v)); /* (nil if none) */
  else
    lua_pushinteger(L, (lua_Integer)v);
}

/***
Every heap option, as the C library declares it.
@function options
@treturn table `{name = {kind=, default=, min=, max=, choices=, collected_only=, description=}}`;
`kind` is "bool", "int", "bytes" or "enum"; `choices` (enum options) lists the names;
`collected_only` is true for an option only collected heaps read (a manual heap ignores its
`HEAPLAB_` variable); `tostring`
shows a line an option
@usage for name, o in pairs(heaplab.options()) do print(name, o.default, o.description) end
*/
/* heaplab.options() -> {name = {kind, default, min, max, choices, collected_only,
 * description}} */
static int l_options(lua_State *L) {
  int n = hl_option_count();
  lua_createtable(L, 0, n);
  lhl_setmetatable(L, OPTIONS_MT);
  for (int i = 0; i < n; i++) {
    hl_option_info info;
    if (hl_option_info_get(i, &info)) continue;
    lua_createtable(L, 0, 7);
    lhl_setmetatable(L, OPTION_MT);
    lua_pushstring(L, kind_name(info.kind));
    lua_setfield(L, -2, "kind");
    lhl_push_option_value(L, i, &info, info.def);
    lua_setfield(L, -2, "default");
    lua_pushinteger(L, (lua_Integer)info.min);
    lua_setfield(L, -2, "min");
    lua_pushinteger(L, (lua_Integer)info.max);
    lua_setfield(L, -2, "max");
    if (info.kind == HL_OPT_ENUM) {
      lua_newtable(L);
      for (int64_t k = info.min; k <= info.max; k++) {
        lua_pushstring(L, hl_option_choice(i, k));
        lua_rawseti(L, -2, (lua_Integer)(k - info.min + 1));
      }
      lua_setfield(L, -2, "choices");
    }
    lua_pushboolean(L, info.collected_only);
    lua_setfield(L, -2, "collected_only");
    lua_pushstring(L, info.description);
    lua_setfield(L, -2, "description");
    lua_setfield(L, -2, info.name);
  }
  return 1;
}

/***
The names of every counter of `heap:stats`, in the C library's order.
@function stat_names
@treturn {string,...}
*/
static int l_stat_names(lua_State *L) {
  int n = hl_stat_count();
  lua_createtable(L, n, 0);
  for (int i = 0; i < n; i++) {
    lua_pushstring(L, hl_stat_name(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/***
The fault injection sites (`heap:inject`), e.g. "reserve", "release", "restore".
@function fault_sites
@treturn {string,...}
*/
static int l_fault_sites(lua_State *L) {
  lua_createtable(L, HL_SITE_COUNT, 0);
  for (int i = 0; i < HL_SITE_COUNT; i++) {
    lua_pushstring(L, hl_fault_site_name(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/***
The fault schedules (`heap:inject`): "off", "first", "always", "every", "sticky".
@function fault_modes
@treturn {string,...}
*/
static int l_fault_modes(lua_State *L) {
  lua_createtable(L, HL_FAULT_MODE_COUNT, 0);
  for (int i = 0; i < HL_FAULT_MODE_COUNT; i++) {
    lua_pushstring(L, hl_fault_mode_name(i));
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

/* ---- process-wide probes --------------------------------------------------------- */

/***
What the OS charges this process now, from /proc/self/smaps_rollup.
@function footprint
@treturn table `{phys_footprint=, rss=, anonymous=, lazyfree=, swap=, anon_huge=}` in bytes
(anon_huge: AnonHugePages, the part of anonymous that transparent huge pages back); `tostring`
shows them in MiB
@return nil, message, code when the figures cannot be read
*/
static int l_footprint(lua_State *L) {
  hl_footprint f;
  int rc = hl_footprint_get(&f);
  if (rc) {
    char msg[300];
    snprintf(msg, sizeof msg, "heaplab.%s", hl_heap_error(NULL)); /* (the file, the reason) */
    return lhl_push_failure(L, msg, rc);
  }
  lua_createtable(L, 0, 6);
  lhl_setmetatable(L, FOOTPRINT_MT);
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
  lua_pushinteger(L, (lua_Integer)f.anon_huge);
  lua_setfield(L, -2, "anon_huge");
  return 1;
}

/***
CLOCK_MONOTONIC in nanoseconds: the clock of events and of the sampler's series.
@function clock_ns
@treturn integer
*/
/* CLOCK_MONOTONIC in ns: the clock of the sampler's series and of events. */
static int l_clock_ns(lua_State *L) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  lua_pushinteger(L, (lua_Integer)ts.tv_sec * 1000000000 + ts.tv_nsec);
  return 1;
}

/***
This process's id.
@function pid
@treturn integer
*/
static int l_pid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getpid());
  return 1;
}

/* ---- registration ------------------------------------------------------------------- */

static const luaL_Reg module_functions[] = {
    {"heap", lhl_heap_new},
    {"options", l_options},
    {"footprint", l_footprint},
    {"sampler", lhl_sampler_new},
    {"stat_names", l_stat_names},
    {"fault_sites", l_fault_sites},
    {"fault_modes", l_fault_modes},
    {"clock_ns", l_clock_ns},
    {"pid", l_pid},
    {NULL, NULL}};

/* The only exported symbol (heaplab_lua.map): require "heaplab" calls it. */
__attribute__((visibility("default"))) int luaopen_heaplab(lua_State *L);

int luaopen_heaplab(lua_State *L) {
  lhl_open_heap(L);
  lhl_open_object(L);
  lhl_open_sampler(L);
  lhl_open_region(L);
  lhl_open_show(L);
  luaL_newlib(L, module_functions);
  lua_pushstring(L, hl_version());
  lua_setfield(L, -2, "version");
  lua_pushfstring(L, "heaplab %s", hl_version());
  lua_setfield(L, -2, "_VERSION");
  lua_pushinteger(L, (lua_Integer)hl_max_size());
  lua_setfield(L, -2, "MAX_SIZE");
  lua_pushinteger(L, (lua_Integer)hl_max_refs());
  lua_setfield(L, -2, "MAX_REFS");
  return 1;
}
