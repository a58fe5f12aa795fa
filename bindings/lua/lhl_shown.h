/*
 * lhl_shown.h -- what a Lua value is, for a message ("'0.01'", "1.5", "nan",
 * "true", "nothing", "a table"), shared by the Lua module (args.c's
 * lhl_shown, which names the module's own values first) and the launcher's
 * heaplab.client (clients/lua_client_module.c), which links no other part of
 * the module: it kept a copy of its own, which said "-nan" and "a no value"
 * where the module says "nan" and "nothing" (session 44).  Header-only, as
 * lhl_int64.h, so that neither build lists one more source.
 */
#ifndef HEAPLAB_LHL_SHOWN_H
#define HEAPLAB_LHL_SHOWN_H

#include <stdio.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

/* A float for a message: "nan" whatever its sign bit (printf's "-nan" for
 * 0/0 read as a negative number: the C API hunt, session 33). */
static inline const char *lhl_float_text(double v, char *buf, size_t len) {
  if (v != v) snprintf(buf, len, "nan");
  else snprintf(buf, len, "%.17g", v);
  return buf;
}

/* The value at idx as a message shows it, a userdata by its metatable's
 * __name ("a userdata (with the metatable of heaplab.object)" when the name
 * is one of the module's: a metatable of ours on another userdata names it
 * no more than it makes it one). */
static inline const char *lhl_shown_value(lua_State *L, int idx, char *buf, size_t len) {
  switch (lua_type(L, idx)) {
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx))
      snprintf(buf, len, "%lld", (long long)lua_tointeger(L, idx));
    else
      lhl_float_text((double)lua_tonumber(L, idx), buf, len);
    return buf;
  case LUA_TSTRING: snprintf(buf, len, "'%.60s'", lua_tostring(L, idx)); return buf;
  case LUA_TBOOLEAN: return lua_toboolean(L, idx) ? "true" : "false";
  case LUA_TNONE: return "nothing";
  case LUA_TUSERDATA:
    switch (luaL_getmetafield(L, idx, "__name")) {
    case LUA_TNIL: break; /* nothing pushed */
    case LUA_TSTRING:
      snprintf(buf, len, strncmp(lua_tostring(L, -1), "heaplab.", 8) ? "a %.60s"
                         : "a userdata (with the metatable of %.60s)", lua_tostring(L, -1));
      lua_pop(L, 1);
      return buf;
    default: lua_pop(L, 1);
    }
    /* fall through */
  default: snprintf(buf, len, "a %s", luaL_typename(L, idx)); return buf;
  }
}

#endif
