"""The Lua module stays mapped after lua_close while a thread of heaplab's runs in it.

Every thread heaplab starts runs the module's code: the parallel marker's
process-wide helpers (core/src/gc/markers.c), a sampler's thread, a background
collector's.  lua_close dlcloses the C modules it loaded, and a thread that
runs on afterwards would run in unmapped memory.  The first such thread pins
the object it runs in (hl__pin_code, core/src/registry.c: dlopen
RTLD_NODELETE).  A sampler or a heap made by a finalizer that runs *during*
lua_close is never finalized (Lua 5.4 does not finalize objects made while a
state closes), so its thread outlives the state: before the pin covered them,
stock lua5.4 died with SIGSEGV at exit in about half the runs of such a
script.

This embeds the real Lua 5.4 library with ctypes -- a program that closes its
state and goes on -- and looks for the module in /proc/self/maps after
lua_close, one scenario per process (the pin is process-wide).  Without the
pin the module is gone (checked by disabling hl__pin_code: every scenario
fails)."""
import ctypes
import os
import subprocess
import sys

SCENARIOS = {
    # a parallel mark's helpers sleep in the module
    "marks": """
local h = heaplab.heap{ mark_threads = 2 }
local r = h:fill(64 << 20, 64)
local used = 0
for _ = 1, 6 do
  h:collect()
  local u = h:stats().mark_threads_used
  if u > used then used = u end
end
assert(used >= 2, "no helper took part in the marks: " .. used)
h:close()
""",
    # a sampler made by a finalizer during lua_close: never stopped
    "sampler_made_at_close": """
setmetatable({}, { __gc = function() S = heaplab.sampler(0.0001) end })
""",
    # a heap with a background collector made by a finalizer during lua_close
    "collector_made_at_close": """
setmetatable({}, { __gc = function()
  H = heaplab.heap{ collector = "background" }
  H:fill(1 << 20, 64)
end })
""",
}


def run(module_dir, name):
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
    script = (f"package.cpath = {module_dir + '/?.so'!r} .. ';' .. package.cpath\n"
              f"heaplab = require 'heaplab'\n" + SCENARIOS[name])

    def mapped():
        with open("/proc/self/maps") as f:
            return any(line.rstrip().endswith(module) for line in f)

    L = lua.luaL_newstate()
    lua.luaL_openlibs(L)
    if lua.luaL_loadstring(L, script.encode()) or lua.lua_pcallk(L, 0, 0, 0, None, None):
        sys.exit("lua: " + lua.lua_tolstring(L, -1, None).decode())
    assert mapped(), f"{module} is not mapped while the state is open"
    lua.lua_close(L)
    assert mapped(), f"{name}: {module} was unloaded by lua_close while a thread runs in it"
    print(f"{name}: {module} still mapped after lua_close")


def main(argv):
    module_dir = os.path.abspath(argv[1])  # the build folder holding heaplab.so
    if len(argv) > 2:
        run(module_dir, argv[2])
        return 0
    failed = []
    for name in SCENARIOS:
        p = subprocess.run([sys.executable, __file__, module_dir, name],
                           capture_output=True, text=True, timeout=60)
        sys.stdout.write(p.stdout)
        if p.returncode != 0:
            failed.append(name)
            sys.stdout.write(f"{name}: exit {p.returncode}\n{p.stderr[-2000:]}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
