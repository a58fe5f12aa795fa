"""The Lua module stays mapped after lua_close once a parallel mark has run.

The parallel marker's helper threads are process-wide and sleep in the
module's code between marks (core/src/gc/markers.c); lua_close dlcloses the
C modules it loaded, and a helper woken afterwards would return into unmapped
memory.  The first helper pins the object it runs in (dlopen RTLD_NODELETE).
This embeds the real Lua 5.4 library with ctypes -- a program that closes its
state and goes on -- and looks for the module in /proc/self/maps after
lua_close.  Without the pin it is gone (checked by disabling pin_code)."""
import ctypes
import os
import sys

module_dir = os.path.abspath(sys.argv[1])  # the build folder holding heaplab.so
module = os.path.join(module_dir, "heaplab.so")
lua = ctypes.CDLL("liblua5.4.so.0", mode=ctypes.RTLD_GLOBAL)
lua.luaL_newstate.restype = ctypes.c_void_p
for f in ("luaL_openlibs", "lua_close"):
    getattr(lua, f).argtypes = [ctypes.c_void_p]
lua.luaL_loadstring.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
lua.lua_pcallk.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                           ctypes.c_void_p, ctypes.c_void_p]
lua.lua_tolstring.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
lua.lua_tolstring.restype = ctypes.c_char_p

script = f"""
package.cpath = {module_dir + '/?.so'!r} .. ";" .. package.cpath
local heaplab = require "heaplab"
local h = heaplab.heap{{ mark_threads = 2 }}
local r = h:fill(64 << 20, 64)
local used = 0
for _ = 1, 6 do
  h:collect()
  local u = h:stats().mark_threads_used
  if u > used then used = u end
end
assert(used >= 2, "no helper took part in the marks: " .. used)
h:close()
"""


def mapped():
    with open("/proc/self/maps") as f:
        return any(line.rstrip().endswith(module) for line in f)


L = lua.luaL_newstate()
lua.luaL_openlibs(L)
if lua.luaL_loadstring(L, script.encode()) or lua.lua_pcallk(L, 0, 0, 0, None, None):
    sys.exit("lua: " + lua.lua_tolstring(L, -1, None).decode())
assert mapped(), f"{module} is not mapped while the state is open"
lua.lua_close(L)
assert mapped(), f"{module} was unloaded by lua_close while marker helpers sleep in it"
print(f"{module} still mapped after lua_close")
