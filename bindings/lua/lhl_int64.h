/*
 * lhl_int64.h -- the one test of an integral float beyond the 64-bit
 * integers, shared by the Lua module (args.c, object.c, region.c) and the
 * launcher's heaplab.client (clients/lua_client_module.c), which links no
 * other part of the module.  Header-only so that neither build lists one
 * more source (meson.build, rock.mk).
 */
#ifndef HEAPLAB_LHL_INT64_H
#define HEAPLAB_LHL_INT64_H

#include <lua.h>

/* A float with an integral value beyond the 64-bit integers (1e300, 2^63):
 * 1 above them, -1 below; 0 for any other value.  Such a float is an
 * integer too big (docs/lua.md: an integral float is that integer), not
 * "no integer": h:alloc(1e300) said "size must be an integer, got
 * 1.0000000000000001e+300" where h:alloc(2^62) said its size exceeds the
 * maximum (h41lua, session 41); heaplab.client.sampler(0.01, 1e300) said
 * Lua's "number has no integer representation" (h42left, session 42). */
static inline int lhl_beyond_int64(lua_State *L, int idx) {
  if (lua_type(L, idx) != LUA_TNUMBER || lua_isinteger(L, idx)) return 0;
  double v = (double)lua_tonumber(L, idx);
  /* (a float that large is integral; nan and the infinities are no integer) */
  if (v != v || v - v != 0 || (v >= -0x1p63 && v < 0x1p63)) return 0;
  return v > 0 ? 1 : -1;
}

#endif
