"""The Lua module and SIGINT in a host other than lua5.4 (docs/lua.md, "Ctrl-C").

A long call (here a fill) puts heaplab's SIGINT handler in front of the
host's for the length of the call only: a host with a handler of its own
gets the call stopped with the error "h:fill: interrupted ... (EINTR)" and
its handler run, and finds that handler in place afterwards; a host that
ignores SIGINT keeps ignoring it (the fill runs to its end, the process
lives); two threads' states running long calls at once leave the host's
handler in place.  The host is this Python process embedding the real Lua 5.4 library
with ctypes (as module_outlives_lua_close.py does), one scenario per
process; a thread sends SIGINT once the fill has grown the process by
64 MiB (ctypes drops the GIL during the call).  The disposition is read with sigaction(2) itself."""
import ctypes
import os
import signal
import subprocess
import sys
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)


def disposition():
    """SIGINT's handler address as the kernel holds it (sa_handler is the
    first member of struct sigaction)."""
    buf = ctypes.create_string_buffer(512)
    assert libc.sigaction(signal.SIGINT, None, buf) == 0
    return ctypes.c_void_p.from_buffer(buf).value or 0


def lua_run(module_dir, code):
    """Run code in a new Lua state; returns what it returns (one string)."""
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
              f"heaplab = require 'heaplab'\n" + code)
    L = lua.luaL_newstate()
    lua.luaL_openlibs(L)
    if lua.luaL_loadstring(L, script.encode()) or lua.lua_pcallk(L, 0, 1, 0, None, None):
        sys.exit("lua: " + lua.lua_tolstring(L, -1, None).decode())
    out = lua.lua_tolstring(L, -1, None).decode()
    lua.lua_close(L)
    return out


def resident():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def kill_once_filling(mib=64, limit=60.0):
    """SIGINT once this process has grown by mib MiB: the fill is running.
    (A fixed 0.2 s sent it before the fill began whenever the Lua state's
    set-up took longer -- a loaded machine -- and the fill ran to its end:
    with a 0.3 s wait put before the fill, host_handler failed every time.)"""
    base = resident()

    def go():
        deadline = time.monotonic() + limit
        while resident() < base + (mib << 20) and time.monotonic() < deadline:
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=go, daemon=True).start()


FILL = """
local h = heaplab.heap{}
local t0 = heaplab.clock_ns()
local r, err = pcall(h.fill, h, %d << 20, 256)
return ("%%s|%%.2f|%%d"):format(r and tostring(err) or err, (heaplab.clock_ns() - t0) / 1e9,
                             h:stats().handles)
"""


def host_handler(module_dir):
    got = []
    signal.signal(signal.SIGINT, lambda signum, frame: got.append(signum))
    before = disposition()
    kill_once_filling()
    out = lua_run(module_dir, FILL % 2048)
    after = disposition()
    msg, took, handles = out.rsplit("|", 2)
    assert "h:fill: " in msg and "interrupted" in msg and "(EINTR)" in msg, out
    assert float(took) < 1.5, f"the fill ran {took} s, SIGINT sent 64 MiB into it"
    assert handles == "0", f"{handles} handles left by the interrupted fill"
    assert after == before, f"SIGINT's handler {after:#x} after the fill, {before:#x} before"
    time.sleep(0.01)  # (CPython runs the Python handler at its next bytecodes)
    assert got == [signal.SIGINT], f"the host's handler did not run: {got}"
    print(f"host handler: {msg} after {took} s; the host's handler ran and is in place")


def ignored(module_dir):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    kill_once_filling()
    out = lua_run(module_dir, FILL % 512)
    msg, took, handles = out.rsplit("|", 2)
    assert msg.startswith("heaplab.object"), f"the fill did not complete: {out}"
    assert disposition() == 1, f"SIGINT is no longer ignored: {disposition():#x}"  # SIG_IGN
    print(f"SIGINT ignored: the fill completed ({took} s) and SIGINT is still ignored")


LOOP = """
local h = heaplab.heap{reserve_bytes = 64 << 20}
local o = h:alloc(16)
for i = 1, %d do o:checksum() end
h:close()
return "done"
"""


def two_states(module_dir):
    """Two threads, a Lua state each, running long calls at once: the first
    call to start puts heaplab's handler in front, the last to end puts the
    host's back.  Each call did both for itself, and interleaved calls left
    heaplab's handler in place for good (one call's "before" was the other's
    heaplab handler) -- and raced hl_interrupt_attach into chaining heaplab's
    handler to itself (a SIGINT then recursed to SIGSEGV): the review of
    session 28."""
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    before = disposition()
    for round_ in range(20):
        threads = [threading.Thread(target=lua_run, args=(module_dir, LOOP % 20000))
                   for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        after = disposition()
        assert after == before, (f"round {round_}: SIGINT's handler {after:#x} after the calls "
                                 f"ended, the host's {before:#x}")
    print("two states: the host's handler is back after every round of interleaved calls")


SCENARIOS = {"host_handler": host_handler, "ignored": ignored, "two_states": two_states}


def main(argv):
    module_dir = argv[1]
    if len(argv) == 3:
        SCENARIOS[argv[2]](module_dir)
        return 0
    for name in SCENARIOS:
        p = subprocess.run([sys.executable, __file__, module_dir, name], capture_output=True,
                           text=True, timeout=120)
        print(p.stdout, end="")
        if p.returncode:
            print(f"{name}: exit status {p.returncode}\n{p.stderr}")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
