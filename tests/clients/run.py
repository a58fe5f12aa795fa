"""Real programs on heaplab-lua and heaplab-python (issue 10), one scenario per
Meson test in suite 'clients' (tests/clients/meson.build):

    python3 tests/clients/run.py SCENARIO

Every scenario runs the same program on heaplab (the launcher's default), on
the C library's allocator (HEAPLAB_ALLOCATOR=libc, the same binary) and, where
it makes sense, on the stock interpreter (lua5.4 / python3), and asserts that
the results are identical: stdout, stderr and exit status, or the files the
program wrote.  The fault scenarios rerun a program with every restore failing
and the primary release advice refused, and assert the output did not change
while the faults really fired (the launcher's HEAPLAB_STATS report says so).

Paths come from the environment (Meson sets them): HEAPLAB_LUA_LAUNCHER,
HEAPLAB_PYTHON_LAUNCHER, STOCK_LUA, STOCK_PYTHON.
"""
import collections
import concurrent.futures
import filecmp
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from scenarios import three_at_a_time, without_proc  # noqa: E402  (tests/scenarios.py)

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAMS = os.path.join(HERE, "programs")
LUA = os.environ.get("HEAPLAB_LUA_LAUNCHER", "")
PYTHON = os.environ.get("HEAPLAB_PYTHON_LAUNCHER", "")
STOCK_LUA = os.environ.get("STOCK_LUA") or shutil.which("lua5.4") or ""
STOCK_PYTHON = os.environ.get("STOCK_PYTHON") or sys.executable
LUA51_PATH = "/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;"  # luacheck lives there
PENLIGHT = "/usr/share/lua/5.1/pl"
DKJSON_EXAMPLES = "/usr/share/doc/lua-dkjson/examples"
ALLOCATORS = ("heaplab", "libc")

# CPython's own regression tests run under heaplab-python (about 20 s here)
REGRTESTS = ["test_list", "test_dict", "test_set", "test_json", "test_gc", "test_unicode",
             "test_bytes", "test_weakref", "test_thread", "test_tracemalloc", "test_capi"]

# every restore fails; the primary release advice is refused for a while
FAULTS = {"HEAPLAB_FAULT_RESTORE": "always:EIO", "HEAPLAB_FAULT_RELEASE": "first:40:ENOMEM",
          "HEAPLAB_WARM_PAGES": "0"}


class Missing(Exception):
    pass


def need(path, what):
    """A missing program or package fails the scenario (it never skips): they
    are all built by Meson or installed by tools/setup.sh, and a skip would
    let `make test` pass without the real programs ever running."""
    if not path or not os.path.exists(path):
        raise Missing(f"{what} is not available ({path or 'not configured'}): "
                      "run tools/setup.sh and build with meson")


def clean_env(extra=None, allocator=None):
    """The caller's environment without any HEAPLAB_* or PYTHONMALLOC (a run
    says what it wants), plus MALLOC_PERTURB_=0."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("HEAPLAB_") or k == "PYTHONMALLOC")}
    env["MALLOC_PERTURB_"] = "0"
    env.update(extra or {})
    if allocator:
        env["HEAPLAB_ALLOCATOR"] = allocator
    return env


def run(argv, executable=None, env=None, allocator=None, stdin=None, cwd=None, timeout=300):
    """Run argv (argv[0] is what the program sees as its name; `executable`
    is what actually runs).  Returns (status, stdout, stderr) as text."""
    p = subprocess.run(argv, executable=executable, env=clean_env(env, allocator),
                       input=stdin, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                       errors="replace")
    return p.returncode, p.stdout, p.stderr


def same(results, what):
    """All (status, stdout, stderr) results equal, or a readable failure."""
    names = list(results)
    first = results[names[0]]
    for n in names[1:]:
        if results[n] != first:
            a, b = first, results[n]
            diff = [f"{k}: {names[0]}={x!r:.600} {n}={y!r:.600}"
                    for k, x, y in zip(("status", "stdout", "stderr"), a, b) if x != y]
            raise AssertionError(f"{what}: {names[0]} and {n} differ\n  " + "\n  ".join(diff))


def report(path):
    with open(path) as f:
        return json.load(f)


# ---------------------------------------------------------------------------
# heaplab-lua

LUA_CASES = [
    # (name, args, stdin, extra environment)
    ("-e", ["-e", "print(1 + 1, #arg, arg[0], arg[-1])"], None, {}),
    ("-e in order", ["-e", "x = 6", "-e", "print(x * 7)"], None, {}),
    ("script and args", ["script.lua", "a", "b c", "-e"], None, {}),
    ("-l mod", ["-l", "mod", "-e", "print(mod.v)"], None, {}),
    ("-l g=mod", ["-lg=mod", "-e", "print(g.v, mod)"], None, {}),
    ("stdin with args", ["-", "x", "y"], "print('stdin', ...) print(arg[0], arg[1])", {}),
    ("stdin, no args", [], "print('piped', #arg)", {}),
    ("--", ["--", "script.lua", "-v"], None, {}),
    ("runtime error", ["-e", "local t = nil; return t.x"], None, {}),
    ("error object", ["-e", "error({})"], None, {}),
    ("error with __tostring",
     ["-e", "error(setmetatable({}, {__tostring = function() return 'custom' end}))"], None, {}),
    ("os.exit(5)", ["-e", "io.write('out') os.exit(5)"], None, {}),
    ("os.exit(false)", ["-e", "os.exit(false)"], None, {}),
    ("os.exit(true, true)", ["-e", "os.exit(true, true)"], None, {}),
    ("syntax error", ["bad.lua"], None, {}),
    ("missing script", ["no_such_file.lua"], None, {}),
    ("-W warnings", ["-W", "-e", "warn('hello', ' world') warn('@off') warn('hidden')"], None, {}),
    ("warnings off", ["-e", "warn('hidden')"], None, {}),
    ("LUA_INIT", ["-e", "print(init)"], None, {"LUA_INIT": "init = 'from LUA_INIT'"}),
    ("LUA_INIT_5_4", ["-e", "print(init)"], None,
     {"LUA_INIT": "init = 'old'", "LUA_INIT_5_4": "init = 'new'"}),
    ("LUA_INIT=@file", ["-e", "print(mod_from_init)"], None, {"LUA_INIT": "@init.lua"}),
    ("-E", ["-E", "-e", "print(init, package.path:find('nowhere') ~= nil)"], None,
     {"LUA_INIT": "init = 1", "LUA_PATH": "/nowhere/?.lua"}),
    ("generational", ["-e", "print(collectgarbage('incremental'))"], None, {}),
    ("-v", ["-v"], None, {}),
    ("-v -e", ["-v", "-e", "print'hello'"], None, {}),
    ("big tables and strings",
     ["-e", "local t = {} for i = 1, 300000 do t[i] = {i, tostring(i)} end "
            "local s = string.rep('ab', 1 << 22) print(#t, #s, t[12345][2])"], None, {}),
]

# our usage text ends with the HEAPLAB_* variables: compare status and the
# first line of stderr only
LUA_LOOSE = [
    ("unknown option", ["-Q"], None, {}),
    ("-e needs an argument", ["-e"], None, {}),
]

LUA_FILES = {
    "script.lua": "print('script', select('#', ...), ...)\nprint(arg[0], arg[1], arg[-1])\n",
    "mod.lua": "return { v = 'module value' }\n",
    "bad.lua": "print('unclosed'\n",
    "init.lua": "mod_from_init = 'set by @init.lua'\n",
}


def lua_cli():
    """heaplab-lua runs scripts as lua5.4 does (compared with lua5.4 itself
    and with the same binary on libc)."""
    need(LUA, "heaplab-lua")
    need(STOCK_LUA, "lua5.4")
    with tempfile.TemporaryDirectory() as d:
        for name, text in LUA_FILES.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        base = {"LUA_PATH": os.path.join(d, "?.lua") + ";;"}
        for loose, cases in ((False, LUA_CASES), (True, LUA_LOOSE)):
            for name, args, stdin, extra in cases:
                env = dict(base, **extra)
                res = {"lua5.4": run(["lua5.4"] + args, STOCK_LUA, env, stdin=stdin, cwd=d)}
                for a in ALLOCATORS:
                    res[a] = run(["lua5.4"] + args, LUA, env, a, stdin=stdin, cwd=d)
                if loose:
                    res = {k: (s, "", e.splitlines()[0] if e else "") for k, (s, o, e) in
                           res.items()}
                same(res, f"heaplab-lua {name} {args}")
        # interactive mode reads statements and expressions from stdin
        for a in ALLOCATORS:
            status, out, err = run(["lua5.4", "-i"], LUA, base, a, stdin="x = 20\nx * 2 + 2\n",
                                   cwd=d)
            assert status == 0 and "42" in out and not err, f"-i on {a}: {status} {out!r} {err!r}"
    print(f"{len(LUA_CASES) + len(LUA_LOOSE)} command lines identical to lua5.4 on both allocators")


def lua_ldoc():
    """ldoc over Penlight's sources: the HTML it writes is byte-identical on
    heaplab, on libc and on lua5.4."""
    need(LUA, "heaplab-lua")
    need(PENLIGHT, "Penlight (lua-penlight)")
    need("/usr/bin/ldoc", "ldoc (lua-ldoc)")
    env = {"SOURCE_DATE_EPOCH": "1700000000"}   # ldoc's "Last updated" line
    with tempfile.TemporaryDirectory() as d:
        outs = {}
        for name, exe, alloc in [("heaplab", LUA, "heaplab"), ("libc", LUA, "libc"),
                                 ("lua5.4", STOCK_LUA, None)]:
            if not exe:
                continue
            work = os.path.join(d, name)
            os.mkdir(work)
            status, out, err = run(["lua5.4", "/usr/bin/ldoc", "-a", "-d", "doc", PENLIGHT], exe,
                                   env, alloc, cwd=work)
            assert status == 0, f"ldoc on {name} exited {status}: {err}"
            outs[name] = (status, out.replace(work, "WORK"), err.replace(work, "WORK"))
        same(outs, "ldoc's messages")
        files = 0
        for name in outs:
            if name == "heaplab":
                continue
            cmp = filecmp.dircmp(os.path.join(d, "heaplab", "doc"), os.path.join(d, name, "doc"))
            stack = [cmp]
            while stack:
                c = stack.pop()
                assert not c.left_only and not c.right_only, f"ldoc trees differ: {c.left_only} {c.right_only}"
                for f in c.common_files:
                    a, b = os.path.join(c.left, f), os.path.join(c.right, f)
                    assert filecmp.cmp(a, b, shallow=False), f"{f} differs between heaplab and {name}"
                    files += 1
                stack.extend(c.subdirs.values())
        assert files > 20, f"ldoc wrote only {files} files"
    print(f"ldoc: {files // max(1, len(outs) - 1)} files byte-identical across {sorted(outs)}")


def json_lines(out):
    """jsontest.lua prints tables encoded as JSON objects whose key order is
    Lua's hash order -- seeded per run from the time and addresses (ASLR),
    on any allocator -- so objects are compared as parsed, not as text."""
    lines = []
    for line in out.splitlines():
        head, sep, tail = line.partition("\t")
        if sep and tail[:1] in "[{":
            try:
                tail = json.dumps(json.loads(tail), sort_keys=True)
            except ValueError:
                pass
        lines.append(head + sep + tail)
    return "\n".join(lines)


def lua_dkjson():
    """dkjson: its test program's results are identical everywhere; its speed
    test (a tenth of its iterations) runs to the end with the same results
    on both allocators."""
    need(LUA, "heaplab-lua")
    need(os.path.join(DKJSON_EXAMPLES, "jsontest.lua"), "dkjson's examples (lua-dkjson)")
    res = {a: run(["lua5.4", os.path.join(DKJSON_EXAMPLES, "jsontest.lua"), "dkjson"], LUA,
                  None, a) for a in ALLOCATORS}
    if STOCK_LUA:
        res["lua5.4"] = run(["lua5.4", os.path.join(DKJSON_EXAMPLES, "jsontest.lua"), "dkjson"],
                            STOCK_LUA)
    res = {k: (st, json_lines(out), err) for k, (st, out, err) in res.items()}
    same(res, "dkjson jsontest.lua")
    assert res["heaplab"][0] == 0 and "encoded as" in res["heaplab"][1], res["heaplab"]
    speed = os.path.join(PROGRAMS, "dkjson_speed.lua")
    results = {}
    for a in ALLOCATORS:
        status, out, err = run(["lua5.4", speed, "10000"], LUA, None, a)
        lines = out.splitlines()
        assert status == 0 and [ln.split("\t")[0] for ln in lines[:2]] == \
            ["Decoding:", "Encoding:"], (a, status, out, err)
        results[a] = (status, "\n".join(lines[2:]), err)    # the timings aside
    same(results, "dkjson speed test results")
    print("dkjson: jsontest identical, speed test (a tenth) completes with the same results")


def lua_luacheck():
    """luacheck over Penlight, busted and luacheck itself: the same report
    (and exit status 1 for the warnings it finds) everywhere."""
    need(LUA, "heaplab-lua")
    need("/usr/bin/luacheck", "luacheck (lua-check)")
    args = ["lua5.4", "/usr/bin/luacheck", "--no-color", "--codes", "--no-cache", PENLIGHT,
            "/usr/share/lua/5.4/busted", "/usr/share/lua/5.1/luacheck"]
    env = {"LUA_PATH": LUA51_PATH}
    res = {a: run(args, LUA, env, a) for a in ALLOCATORS}
    if STOCK_LUA:
        res["lua5.4"] = run(args, STOCK_LUA, env)
    same(res, "luacheck")
    status, out, _ = res["heaplab"]
    assert status == 1 and "warnings / 0 errors in" in out, (status, out[-500:])
    print("luacheck:", out.strip().splitlines()[-1])


def lua_busted():
    """busted on a spec of ours (passes) and on a failing one (the same
    failures and exit status), TAP output identical everywhere."""
    need(LUA, "heaplab-lua")
    need("/usr/bin/busted", "busted (lua-busted)")
    for spec, want in (("spec", 0), ("spec_failing", 1)):
        args = ["lua5.4", "/usr/bin/busted", "-o", "TAP", spec]
        res = {a: run(args, LUA, None, a, cwd=HERE) for a in ALLOCATORS}
        if STOCK_LUA:
            res["lua5.4"] = run(args, STOCK_LUA, cwd=HERE)
        same(res, f"busted {spec}")
        status, out, err = res["heaplab"]
        assert (status == 0) == (want == 0), f"busted {spec}: exit {status}\n{out}\n{err}"
        if want == 0:
            assert "not ok" not in out and out.strip().endswith("1..12"), out
        else:
            assert out.count("not ok") == 2, out
    print("busted: spec passes, spec_failing fails the same way, on every allocator")


def lua_report():
    """HEAPLAB_STATS: written at the end of a script, on os.exit and on an
    error exit; every stat by name; a libc report has no heap; bad settings
    are refused with a message naming them."""
    need(LUA, "heaplab-lua")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        work = "local t = {} for i = 1, 200000 do t[i] = {i} end t = nil collectgarbage() "
        for how, code, want in (("end", work, 0), ("os.exit", work + "os.exit(3)", 3),
                                ("error", work + "error('x')", 1)):
            if os.path.exists(path):
                os.unlink(path)
            t0 = time.monotonic()
            status, _, err = run(["heaplab-lua", "-e", code], LUA, {"HEAPLAB_STATS": path})
            wall = time.monotonic() - t0
            assert status == want, f"{how}: exit {status}, {err}"
            r = report(path)
            assert r["allocator"] == "heaplab" and r["launcher"] == "heaplab-lua", r
            st = r["stats"]
            assert st["manual_mallocs"] > 200000 and st["manual_frees"] > 200000, (how, st)
            assert st["total_pages"] > 0 and r["options"]["mode"] == "manual", r["options"]
            assert r["footprint"]["phys_footprint"] > 0 and r["resident_bytes"] > 0, r
            assert (r["vma_count"] or 0) >= 1, f"{how}: vma_count {r['vma_count']}"
            # seconds, within the run as this process timed it
            assert 0 < r["elapsed_s"] <= wall, f"{how}: elapsed_s {r['elapsed_s']}, run {wall:.3f} s"
        # every stat and option the heap has, by the names heaplab.client gives
        names = ("local c = require 'heaplab.client' for _, t in ipairs{c.stats(), c.options()} do "
                 "local k = {} for n in pairs(t) do k[#k + 1] = n end table.sort(k) "
                 "print(table.concat(k, ' ')) end")
        status, out, err = run(["heaplab-lua", "-e", names], LUA, {"HEAPLAB_STATS": path})
        assert status == 0 and not err, (status, err)
        r = report(path)
        stats, options = out.splitlines()
        assert sorted(r["stats"]) == stats.split(), (sorted(r["stats"]), stats)
        assert sorted(r["options"]) == options.split(), (sorted(r["options"]), options)
        status, _, _ = run(["heaplab-lua", "-e", work], LUA,
                           {"HEAPLAB_STATS": path, "HEAPLAB_WARM_PAGES": "3"})
        assert report(path)["options"]["warm_pages"] == 3, "HEAPLAB_WARM_PAGES not applied"
        status, _, _ = run(["heaplab-lua", "-e", "print(1)"], LUA, {"HEAPLAB_STATS": path},
                           "libc")
        r = report(path)
        assert status == 0 and r["allocator"] == "libc" and r["stats"] is None, r
        for var, value, needle in (("HEAPLAB_ALLOCATOR", "jemalloc", "HEAPLAB_ALLOCATOR"),
                                   ("HEAPLAB_WARM_PAGES", "-1", "warm_pages"),
                                   ("HEAPLAB_MODE", "collected", "HEAPLAB_MODE"),
                                   ("HEAPLAB_FAULT_RESTORE", "sometimes", "HEAPLAB_FAULT_RESTORE")):
            status, out, err = run(["heaplab-lua", "-e", "print(1)"], LUA, {var: value})
            assert status == 2 and needle in err and not out, f"{var}={value}: {status} {err!r}"
        # collected-mode options, exported for a program's own collected heaps,
        # are not the launcher's (its heap is manual): ignored, not refused --
        # since session 31 a manual heap refuses them when asked for one
        status, out, err = run(["heaplab-lua", "-e", "print(1)"], LUA,
                               {"HEAPLAB_STATS": path, "HEAPLAB_GENERATIONAL": "1",
                                "HEAPLAB_COLLECTOR": "background", "HEAPLAB_COMPACT": "sparse"})
        o = report(path)["options"]
        assert status == 0 and out == "1\n" and not err, (status, out, err)
        assert o["mode"] == "manual" and not o["generational"] and o["collector"] != "background", o
        assert o["compact"] == "never", o  # (it was refused: session 33)
        # every collected-only option (hl_option_info.collected_only), not a
        # hand list: HEAPLAB_YOUNG_MIN_BYTES=64m made heaplab-lua refuse to
        # start (the review of session 33)
        status, out, err = run(["heaplab-lua", "-e", "print(1)"], LUA,
                               {"HEAPLAB_STATS": path, "HEAPLAB_YOUNG_MIN_BYTES": "64m",
                                "HEAPLAB_PACING_MAX_WAIT_MS": "7"})
        o = report(path)["options"]
        assert status == 0 and out == "1\n" and not err, (status, out, err)
        assert o["young_min_bytes"] == 4 << 20 and o["pacing_max_wait_ms"] == 1000, o
    print("HEAPLAB_STATS written at the end, on os.exit and on errors; bad settings refused")


def lua_faults():
    """Faults injected through HEAPLAB_FAULT_* (every restore fails, the
    primary advice refused for a while) leave a churning program's and
    luacheck's output unchanged -- and they did fire."""
    need(LUA, "heaplab-lua")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        churn = ["lua5.4", os.path.join(PROGRAMS, "churn.lua"), "6", "16"]
        clean = run(churn, LUA, {"HEAPLAB_WARM_PAGES": "0"})
        faulty = run(churn, LUA, dict(FAULTS, HEAPLAB_STATS=path))
        same({"clean": clean, "faults": faulty}, "churn.lua under faults")
        assert clean[0] == 0 and clean[1].count("round") == 6, clean
        st = report(path)["stats"]
        assert st["restore_failed_pages"] > 0 and st["reused_pages"] == 0, st
        assert st["fallback_pages"] > 0 and st["released_pages"] > st["fallback_pages"], st
        args = ["lua5.4", "/usr/bin/luacheck", "--no-color", "--codes", "--no-cache", PENLIGHT]
        if os.path.exists("/usr/bin/luacheck"):
            env = {"LUA_PATH": LUA51_PATH}
            same({"libc": run(args, LUA, env, "libc"),
                  "faults": run(args, LUA, dict(env, **FAULTS))}, "luacheck under faults")
    print(f"faults: {st['restore_failed_pages']} restores failed, {st['fallback_pages']} "
          f"releases took the fallback, {st['upgraded_pages']} upgraded; output unchanged")


def lua_client_module():
    """require 'heaplab.client' inside heaplab-lua: the launcher's own heap,
    the footprint and a sampler, as the E8 program uses them."""
    need(LUA, "heaplab-lua")
    script = os.path.join(HERE, "client_module.lua")
    for a in ALLOCATORS:
        status, out, err = run(["heaplab-lua", script], LUA, None, a)
        assert status == 0 and out.strip().endswith("ok"), f"{a}: {status}\n{out}\n{err}"
    print("heaplab.client works on both allocators")


# ---------------------------------------------------------------------------
# heaplab-python

PY_FILES = {
    "script.py": "import sys\nprint('script', __name__, sys.argv[1:])\n",
    "pkgmod.py": "import sys\nif __name__ == '__main__':\n    print('module', sys.argv[1:])\n",
    "threads.py": (
        "import threading, hashlib, zlib\n"
        "out = {}\n"
        "def work(k):\n"
        "    acc = []\n"
        "    for i in range(3000):\n"
        "        d = {str(j): [j] * (j % 7) for j in range(i % 50)}\n"
        "        acc.append(zlib.crc32(repr(sorted(d.items())).encode()))\n"
        "        hashlib.sha256(bytes(i % 251) * 64).hexdigest()\n"
        "    out[k] = sum(acc)\n"
        "ts = [threading.Thread(target=work, args=(k,)) for k in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "print(sorted(out.items()))\n"),
}

PY_CASES = [
    ("-c", ["-c", "import sys; print(sys.argv, sys.flags.optimize)", "a", "b"], None, {}),
    ("script", ["script.py", "x", "--y"], None, {}),
    ("-m module", ["-m", "pkgmod", "1", "2"], None, {"PYTHONPATH": "."}),
    ("-m json.tool", ["-m", "json.tool"], '{"b": [1, 2], "a": null}', {}),
    ("stdin", ["-"], "import sys\nprint('stdin', sys.argv)\n", {}),
    ("SystemExit(3)", ["-c", "raise SystemExit(3)"], None, {}),
    ("sys.exit(msg)", ["-c", "import sys; sys.exit('bye')"], None, {}),
    ("exception", ["-c", "def f():\n    raise ValueError('boom')\nf()"], None, {}),
    ("-X dev", ["-X", "dev", "-c", "import sys; print(sys.flags.dev_mode)"], None, {}),
    ("-E", ["-E", "-c", "import sys; print(sys.flags.ignore_environment)"], None,
     {"PYTHONOPTIMIZE": "2"}),
    ("-I", ["-I", "-c", "import sys; print(sys.flags.isolated)"], None, {}),
    ("-O", ["-O", "-c", "assert False, 'x'; print('asserts off')"], None, {}),
    ("-W error", ["-W", "error", "-c", "import warnings; warnings.warn('w')"], None, {}),
    ("-V", ["-V"], None, {}),
    ("unknown option", ["-Z"], None, {}),
    ("threads", ["threads.py"], None, {}),
    ("big objects", ["-c", "x = [str(i) * 3 for i in range(300000)]; "
                           "b = bytearray(50 << 20); print(len(x), len(b), x[777])"], None, {}),
]


def python_cli():
    """heaplab-python takes python3's command line (compared with python3
    itself and with the same binary on libc)."""
    need(PYTHON, "heaplab-python")
    with tempfile.TemporaryDirectory() as d:
        for name, text in PY_FILES.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        for name, args, stdin, extra in PY_CASES:
            # argv[0] is python3's own path in every run, so usage lines match
            res = {"python3": run([STOCK_PYTHON] + args, STOCK_PYTHON, extra, stdin=stdin, cwd=d)}
            for a in ALLOCATORS:
                res[a] = run([STOCK_PYTHON] + args, PYTHON, extra, a, stdin=stdin, cwd=d)
            same(res, f"heaplab-python {name} {args}")
        # stdout that cannot be flushed at the end: python3's own status, 120
        # (buffered, as without PYTHONUNBUFFERED; a pipe with no reader)
        res = {}
        for name, exe, a in (("python3", STOCK_PYTHON, None), ("heaplab", PYTHON, "heaplab"),
                             ("libc", PYTHON, "libc")):
            env = {k: v for k, v in clean_env(None, a).items() if k != "PYTHONUNBUFFERED"}
            r, w = os.pipe()
            os.close(r)
            try:
                p = subprocess.run([STOCK_PYTHON, "-c", "import sys; sys.stdout.write('x')"],
                                   executable=exe, env=env, stdout=w, stderr=subprocess.PIPE,
                                   text=True, timeout=60)
            finally:
                os.close(w)
            res[name] = (p.returncode, "", p.stderr)
        same(res, "heaplab-python with stdout unwritable at exit")
        assert res["python3"][0] == 120 and "BrokenPipeError" in res["python3"][2], res
        # -X dev keeps CPython's debug hooks, now over heaplab: they still
        # catch a buffer overrun at free
        code = ("import _testcapi; _testcapi.pymem_buffer_overflow()")
        status, out, err = run([PYTHON, "-X", "dev", "-c", code], PYTHON)
        assert status != 0 and "bad trailing pad byte" in err, (status, err[-2000:])
    print(f"{len(PY_CASES)} command lines identical to python3 on both allocators")


def python_regrtest():
    """CPython's own regression tests pass under heaplab-python (and
    sys.executable is heaplab-python, so their subprocesses run on it too)."""
    need(PYTHON, "heaplab-python")
    # the tests this interpreter's stdlib ships (Debian's libpython3.11-testsuite
    # leaves out test_capi; this process runs on the same stdlib as the launcher)
    import importlib.util
    tests = [t for t in REGRTESTS if importlib.util.find_spec(f"test.{t}") is not None]
    assert len(tests) >= len(REGRTESTS) - 2, (
        f"only {tests} of {REGRTESTS} are installed: install the interpreter's test package "
        "(Debian: libpython3.X-testsuite; tools/setup.sh does)")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        status, out, err = run([PYTHON, "-m", "test", "-q"] + tests, PYTHON,
                               {"HEAPLAB_STATS": path}, cwd=d, timeout=900)
        tail = "\n".join((out + err).strip().splitlines()[-15:])
        assert status == 0, f"regrtest failed (exit {status}):\n{tail}"
        st = report(path)["stats"]
        assert st["manual_mallocs"] > 1_000_000, st
    print(f"CPython regrtest {' '.join(tests)}: passed on heaplab "
          f"({st['manual_mallocs']} mallocs, {st['released_pages']} pages released)")


def python_faults():
    """Faults injected into heaplab-python leave a churning program's output
    unchanged, and regression tests still pass -- the faults did fire."""
    need(PYTHON, "heaplab-python")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        churn = [PYTHON, os.path.join(PROGRAMS, "churn.py"), "6", "16"]
        clean = run(churn, PYTHON, {"HEAPLAB_WARM_PAGES": "0"})
        faulty = run(churn, PYTHON, dict(FAULTS, HEAPLAB_STATS=path))
        same({"clean": clean, "faults": faulty}, "churn.py under faults")
        assert clean[0] == 0 and clean[1].count("round") == 6, clean
        st = report(path)["stats"]
        assert st["restore_failed_pages"] > 0 and st["fallback_pages"] > 0, st
        status, out, err = run([PYTHON, "-m", "test", "-q", "test_json", "test_dict"], PYTHON,
                               dict(FAULTS, HEAPLAB_STATS=path), cwd=d, timeout=600)
        assert status == 0, f"regrtest under faults: exit {status}\n{(out + err)[-3000:]}"
    # a reservation too small to start CPython: a clear line and status 2 (it
    # aborted with a fatal Python error before), and a MemoryError once it runs
    status, out, err = run([PYTHON, "-c", "print(1)"], PYTHON, {"HEAPLAB_RESERVE_BYTES": "1m"})
    assert status == 2 and "out of memory while CPython starts" in err \
        and "HEAPLAB_RESERVE_BYTES" in err and "Fatal Python error" not in err, (status, err)
    status, out, err = run([PYTHON, "-c", "try:\n    x = [str(i) for i in range(10**7)]\n"
                            "except MemoryError:\n    print('MemoryError')"], PYTHON,
                           {"HEAPLAB_RESERVE_BYTES": "64m"})
    assert status == 0 and out.strip() == "MemoryError", (status, out, err)
    print(f"faults: {st['restore_failed_pages']} restores failed, {st['fallback_pages']} "
          f"releases took the fallback; output unchanged, regrtest passes; a reservation too "
          f"small to start: status 2")


def python_report():
    """HEAPLAB_STATS from heaplab-python: on a normal end and on sys.exit;
    a forked child's exit does not overwrite the parent's report."""
    need(PYTHON, "heaplab-python")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        code = ("import os, sys\nx = [str(i) for i in range(100000)]\npid = os.fork()\n"
                "if pid == 0:\n    y = [0] * 10\n    sys.exit(0)\nos.waitpid(pid, 0)\n"
                "print(os.getpid())\nsys.exit(4)")
        status, out, err = run([PYTHON, "-c", code], PYTHON, {"HEAPLAB_STATS": path})
        assert status == 4, (status, err)
        r = report(path)
        assert r["pid"] == int(out.strip()), f"report of pid {r['pid']}, parent {out.strip()}"
        assert r["launcher"] == "heaplab-python" and r["stats"]["manual_mallocs"] > 100000, r
        # ... nor does one that exits after the launcher: it waits for the end of
        # a pipe the launcher's exit closes (run() returns when both are gone)
        code = ("import os, sys\nr, w = os.pipe()\nif os.fork() == 0:\n    os.close(w)\n"
                "    os.read(r, 1)\n    y = [0] * 10\n    sys.exit(0)\n"
                "os.close(r)\nprint(os.getpid())\n")
        status, out, err = run([PYTHON, "-c", code], PYTHON, {"HEAPLAB_STATS": path})
        assert status == 0 and not err, (status, err)
        assert report(path)["pid"] == int(out), f"report of pid {report(path)['pid']}, parent {out}"
        status, _, _ = run([PYTHON, "-c", "pass"], PYTHON, {"HEAPLAB_STATS": path}, "libc")
        assert status == 0 and report(path)["stats"] is None
        # an uncaught KeyboardInterrupt: CPython ends by killing itself with
        # SIGINT (as python3: the status is the signal's), so exit()'s handler
        # never ran and there was no report; it is written at finalisation
        script = os.path.join(d, "interrupted.py")
        with open(script, "w") as f:
            f.write("import os\nprint(os.getpid())\nraise KeyboardInterrupt\n")
        stock = run([STOCK_PYTHON, script])[0]
        for a in ALLOCATORS:
            for argv in ([PYTHON, script], [PYTHON, "-c", open(script).read()]):
                if os.path.exists(path):
                    os.unlink(path)
                status, out, err = run(argv, PYTHON, {"HEAPLAB_STATS": path}, a)
                assert status == stock == -2 and "KeyboardInterrupt" in err, (status, stock, err)
                assert os.path.exists(path), f"{a} {argv[1]}: no report after KeyboardInterrupt"
                assert report(path)["pid"] == int(out) and report(path)["allocator"] == a
        status, out, err = run([PYTHON, "-c", "pass"], PYTHON, {"HEAPLAB_RELEASE_ADVICE": "x"})
        assert status == 2 and "release_advice" in err, (status, err)
        heap_checks = ("s = c.stats(); assert s['manual_mallocs'] > 0, s\n"
                       "assert c.options()['mode'] == 'manual' and c.resident_bytes() > 0\n"
                       "assert c.vma_count() >= 1 and c.trim() is True\n"
                       # the heap's VMAs, as the report counts them (not another figure)
                       "v, r = c.vma_count(), json.loads(c.report())['vma_count']\n"
                       "assert 1 <= v <= r + 8 and r <= v + 8, (v, r)\n")
        common = ("c.sampler_start(0.0005); c.sampler_mark(); x = bytearray(8 << 20)\n"
                  "m = c.sampler_summary(); assert m['samples'] >= 1 and m['max_phys'] > 0, m\n"
                  "assert m['interval_us'] == 500, m\n"
                  # one sampler at a time: a second start is an error, not a lost thread
                  "try:\n    c.sampler_start()\nexcept RuntimeError as e:\n"
                  "    assert 'already running' in str(e), e\n"
                  "else:\n    raise AssertionError('a second sampler_start was accepted')\n"
                  "assert len(c.sampler_series()) >= 1; c.sampler_stop()\n"
                  # a string is no number: named as the bindings name it (the
                  # parse said "must be real number, not str"; True was 1 s)
                  "for a, said in (((\"0.01\",), 'interval_s must be a number, not str'),\n"
                  "                ((True,), 'interval_s must be a number, not bool'),\n"
                  "                ((0.01, '16'), 'capacity must be an int, not str')):\n"
                  "    try:\n        c.sampler_start(*a)\n    except TypeError as e:\n"
                  "        assert str(e) == 'sampler_start: ' + said, e\n"
                  "    else:\n        raise AssertionError(f'sampler_start{a} was accepted')\n"
                  # a capacity beyond the 64-bit integers: the range, as heaplab.Sampler
                  # names it (it was OverflowError's "too large to convert"; session 44)
                  "for cap in (1 << 64, -(1 << 64)):\n"
                  "    try:\n        c.sampler_start(0.01, cap)\n    except ValueError as e:\n"
                  "        assert str(e) == f'sampler_start: capacity {cap} out of range "
                  "[16, 16777216]', e\n"
                  "    else:\n        raise AssertionError(f'capacity {cap} was accepted')\n"
                  # a finalizer that stops the sampler while sampler_series
                  # builds its list (the cyclic collector runs at its tuples'
                  # allocations): the list came back cut short, no error
                  "import gc, time\nc.sampler_start(0.0002, 4096)\n"
                  "t = time.monotonic()\n"
                  "while c.sampler_summary()['samples'] < 600 and time.monotonic() < t + 30: pass\n"
                  "class Stop:\n    def __del__(self): c.sampler_stop()\n"
                  "a = Stop(); a.me = a; del a\nold = gc.get_threshold(); gc.set_threshold(1)\n"
                  "try:\n    s = c.sampler_series()\nexcept RuntimeError as e:\n"
                  "    assert 'stopped while its series was read' in str(e), e\n"
                  "else:\n    raise AssertionError(f'a series of {len(s)} samples, the sampler stopped')\n"
                  "gc.set_threshold(*old)\n"
                  "assert json.loads(c.report())['allocator'] == c.allocator()\n"
                  "assert c.footprint()['rss'] > 0 and c.peak_rss() > 0\n"
                  "print('ok')")
        for a in ALLOCATORS:
            checks = heap_checks if a == "heaplab" else (
                "assert c.stats() is None and c.resident_bytes() is None\n")
            code = "import _heaplab_client as c, json\n" + checks + common
            status, out, err = run([PYTHON, "-c", code], PYTHON, None, a)
            assert status == 0 and out.strip() == "ok", f"_heaplab_client on {a}: {err}"
        # peak_rss is the launcher's own peak (VmHWM), not ru_maxrss, which
        # Linux carries over exec: started by this process holding 256 MiB,
        # heaplab-python said 256 MiB and more in its report and peak_rss()
        held = bytearray(256 << 20)
        for i in range(0, len(held), 4096):
            held[i] = 1
        for a in ALLOCATORS:
            status, out, err = run([PYTHON, "-c", "import _heaplab_client as c\n"
                                    "print(c.peak_rss())"], PYTHON, {"HEAPLAB_STATS": path}, a)
            assert status == 0, (a, err)
            peaks = {"peak_rss()": int(out), "the report's peak_rss": report(path)["peak_rss"]}
            for what, v in peaks.items():
                assert 0 < v < (128 << 20), (
                    f"{a}: {what} {v >> 20} MiB: the parent's 256 MiB counted (ru_maxrss)")
        del held
    print("HEAPLAB_STATS from heaplab-python: end, sys.exit, fork, KeyboardInterrupt; "
          "_heaplab_client works; peak_rss is the launcher's own")


def python_verify_debug_hooks():
    """HEAPLAB_VERIFY=1 keeps CPython's debug allocator hooks working
    (PYTHONMALLOC=debug): a freed object still reads as freed
    (_PyObject_IsFreed finds the hooks' 0xDD fill: verify seals a freed
    block in its first 16 bytes instead of poisoning all of it), the hooks
    still catch an overrun, and test_capi's allocator tests pass -- with
    verify's checks running (the report has the option on and no
    failures)."""
    need(PYTHON, "heaplab-python")
    env = {"HEAPLAB_VERIFY": "1", "PYTHONMALLOC": "debug"}
    checks = ("import _testcapi\n"
              "for name in ('freed', 'uninitialized', 'forbidden_bytes', 'null'):\n"
              "    getattr(_testcapi, f'check_pyobject_{name}_is_freed')()\n"
              "print('ok')")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        status, out, err = run([PYTHON, "-c", checks], PYTHON, dict(env, HEAPLAB_STATS=path))
        assert status == 0 and out.strip() == "ok", f"_PyObject_IsFreed under verify: {err[-2000:]}"
        r = report(path)
        assert r["options"]["verify"] is True and r["stats"]["manual_frees"] > 1000, r
        status, out, err = run([PYTHON, "-c", "import _testcapi; _testcapi.pymem_buffer_overflow()"],
                               PYTHON, env)
        assert status != 0 and "bad trailing pad byte" in err, (status, err[-2000:])
        import importlib.util
        if importlib.util.find_spec("test.test_capi") is not None:
            status, out, err = run([PYTHON, "-m", "test", "test_capi", "-m", "PyMem*"], PYTHON,
                                   env, cwd=d, timeout=300)
            assert status == 0 and "Result: SUCCESS" in out, \
                f"test_capi PyMem*: {(out + err)[-3000:]}"
            what = "test_capi PyMem* passes"
        else:
            # Debian's libpython3.X-testsuite leaves test_capi out (PYTHON=/usr/bin/python3):
            # its PyMemDebugTests' other cases, the same calls and messages
            for mode in ("debug", "malloc_debug"):
                e = dict(env, PYTHONMALLOC=mode)
                for call, says in (
                        ("pymem_api_misuse", "bad ID: Allocated using API 'm', verified using API 'r'"),
                        ("pymem_malloc_without_gil", "called without holding the GIL"),
                        ("pyobject_malloc_without_gil", "called without holding the GIL")):
                    status, out, err = run([PYTHON, "-c", f"import _testcapi; _testcapi.{call}()"],
                                           PYTHON, e)
                    assert status != 0 and says in err, (mode, call, status, err[-2000:])
            what = ("test_capi is not installed with this interpreter: its PyMem debug cases "
                    "(API misuse, no GIL) run one by one and pass")
    print("PYTHONMALLOC=debug under HEAPLAB_VERIFY=1: freed objects read as freed, "
          f"overruns caught, {what}")


# ---------------------------------------------------------------------------
# both

def sparse_survivors():
    """E10's program on both interpreters (issue 18), small: 200,000 objects
    of which 1 in 50 survive.  On heaplab with sub-page release (and with
    verify, which checks every free) the survivors' checksum is the stock
    interpreter's and the C library's, sub-page runs were released, and more
    of the dropped footprint came back than with whole pages alone."""
    need(LUA, "heaplab-lua")
    need(PYTHON, "heaplab-python")
    need(STOCK_LUA, "lua5.4")
    for lang, launcher, stock in (("lua", LUA, STOCK_LUA), ("python", PYTHON, STOCK_PYTHON)):
        prog = os.path.join(PROGRAMS, "sparse_survivors." + ("lua" if lang == "lua" else "py"))
        args = ["50", "200000"]
        out = {}
        for arm, exe, env, alloc in (
                ("subpage", launcher, {"HEAPLAB_SUBPAGE_RELEASE": "1", "HEAPLAB_VERIFY": "1"}, None),
                ("page", launcher, None, None), ("libc", launcher, None, "libc"),
                ("stock", stock, None, None)):
            status, stdout, err = run([exe, prog, arm] + args, exe, env, alloc, timeout=120)
            assert status == 0, f"{lang}/{arm}: exit {status}\n{err[-2000:]}"
            out[arm] = json.loads(stdout)
        drop = {a: {r["phase"]: r for r in d["records"]}["drop"] for a, d in out.items()}
        sums = {a: d["notes"]["checksum"] for a, d in drop.items()}
        assert len({repr(x) for x in sums.values()}) == 1, f"{lang}: checksums differ: {sums}"
        st = drop["subpage"]["stats"]
        assert st["subpage_runs"] > 0 and st["subpage_released_bytes"] > 0, st
        back = {a: drop[a]["phys_before"] - drop[a]["phys_low_after_mark"] for a in ("subpage", "page")}
        assert back["subpage"] > back["page"] + (4 << 20), f"{lang}: returned {back}"
        print(f"{lang}: survivors' checksums agree on heaplab (sub-page release, verify), "
              f"whole pages, libc and stock; {st['subpage_runs']} runs released, "
              f"{back['subpage'] >> 20} MiB back against {back['page'] >> 20} MiB")


def out_of_memory():
    """A launcher whose heap runs out says so in one line: what ran out (the
    reservation, heap_limit_bytes) and the variable that raises it -- not
    Lua's bare "not enough memory" or Python's bare MemoryError (the hostile
    Lua run, HEAPLAB_RESERVE_BYTES=1m).  A memory error the program catches
    adds nothing."""
    need(LUA, "heaplab-lua")
    need(PYTHON, "heaplab-python")
    grow = "local t = {} for i = 1, 2000000 do t[i] = {i} end"
    for var, value, want in (
            ("HEAPLAB_RESERVE_BYTES", "4m", "heaplab-lua: not enough memory: malloc: the "
             "reservation of 4194304 bytes is exhausted (reserve_bytes); raise "
             "HEAPLAB_RESERVE_BYTES"),
            ("HEAPLAB_HEAP_LIMIT_BYTES", "4m", "heaplab-lua: not enough memory: malloc: "
             "heap_limit_bytes 4194304 reached")):
        status, out, err = run(["heaplab-lua", "-e", grow], LUA, {var: value})
        assert status == 1 and err.strip() == err.strip().splitlines()[0], (var, status, err)
        assert err.startswith(want) and err.rstrip().endswith("raise " + var), (var, err)
    # a table's array grows by realloc: its refusal names realloc, not the
    # malloc of the new block (the C API hunt, session 33)
    status, out, err = run(["heaplab-lua", "-e", "local t = {} for i = 1, 1e8 do t[i] = i end"],
                           LUA, {"HEAPLAB_HEAP_LIMIT_BYTES": "4m"})
    assert status == 1 and err.startswith("heaplab-lua: not enough memory: realloc: "
                                          "heap_limit_bytes 4194304 reached"), (status, err)
    status, out, err = run(["heaplab-lua", "-e", f"print(pcall(function() {grow} end))"], LUA,
                           {"HEAPLAB_RESERVE_BYTES": "4m"})
    assert status == 0 and out == "false\tnot enough memory\n" and not err, (status, out, err)
    # a refusal the program caught and went on from is not named by a later
    # memory error it did not cause (error("not enough memory") is one: Lua's
    # own message), nor instead of the refusal that did cause one
    caught = "print((pcall(string.rep, 'x', 200 << 20)))"
    for then, want, *rest in (
            ("collectgarbage() error('not enough memory', 0)", "heaplab-lua: not enough memory\n"),
            ("local t = {1, 2, 3} error('not enough memory', 0)",
             "heaplab-lua: not enough memory\n"),
            ("local t = {} t[1] = string.rep('y', 100 << 20)", "heaplab-lua: not enough memory: "
             "malloc: heap_limit_bytes 67108864 is less than the 104857600 bytes asked: "),
            # with a hook of the program's own: forgotten at the next allocation
            ("local t = {1, 2, 3} error('not enough memory', 0)", "heaplab-lua: not enough "
             "memory\n", "hook"),
            ("local t = {} t[1] = string.rep('y', 100 << 20)", "heaplab-lua: not enough memory: "
             "malloc: heap_limit_bytes 67108864 is less than the 104857600 bytes asked: ", "hook")):
        hook = "debug.sethook(function() end, '', 1 << 30) " if rest else ""
        status, out, err = run(["heaplab-lua", "-e", f"{hook}{caught} {then}"], LUA,
                               {"HEAPLAB_HEAP_LIMIT_BYTES": "64m"})
        assert status == 1 and out == "false\n" and err.startswith(want), (hook, then, status, out,
                                                                            err)
        # (100 MiB is more than the whole 64 MiB limit: refused before the system
        # allocator makes it -- manual.c, session 30 -- with its own message)
        assert want.endswith("\n") or ("nothing freed can make room" in err and
                                       err.rstrip().endswith("raise HEAPLAB_HEAP_LIMIT_BYTES")), err
    status, out, err = run([PYTHON, "-c", "print(1)"], PYTHON, {"HEAPLAB_RESERVE_BYTES": "1m"})
    assert status == 2 and err.startswith("heaplab-python: out of memory while CPython starts") \
        and err.rstrip().endswith("is exhausted (reserve_bytes); raise HEAPLAB_RESERVE_BYTES"), err
    grow = "x = [str(i) for i in range(10**7)]"
    status, out, err = run([PYTHON, "-c", grow], PYTHON, {"HEAPLAB_RESERVE_BYTES": "64m"})
    last = err.strip().splitlines()[-1]
    assert status == 1 and "MemoryError" in err and last == (
        "heaplab-python: the heap refused an allocation: malloc: the reservation of 67108864 "
        "bytes is exhausted (reserve_bytes); raise HEAPLAB_RESERVE_BYTES"), (status, err)
    status, out, err = run([PYTHON, "-c", f"try:\n    {grow}\nexcept MemoryError:\n    print('caught')"],
                           PYTHON, {"HEAPLAB_RESERVE_BYTES": "64m"})
    assert status == 0 and out == "caught\n" and not err, (status, out, err)
    # ... nor after a later failure that is no MemoryError (it said "the heap
    # refused an allocation" under a ValueError's traceback)
    status, out, err = run([PYTHON, "-c", f"try:\n    {grow}\nexcept MemoryError:\n    "
                            f"print('caught')\nraise ValueError('not a memory error')"],
                           PYTHON, {"HEAPLAB_RESERVE_BYTES": "64m"})
    assert status == 1 and out == "caught\n" and \
        err.strip().splitlines()[-1] == "ValueError: not a memory error", (status, out, err)
    # ... nor after a MemoryError the program raised itself, with a message
    # (the launchers hunt, session 25)
    status, out, err = run([PYTHON, "-c", f"try:\n    {grow}\nexcept MemoryError:\n    "
                            f"print('caught')\nraise MemoryError('my own limit')"],
                           PYTHON, {"HEAPLAB_RESERVE_BYTES": "64m"})
    assert status == 1 and out == "caught\n" and \
        err.strip().splitlines()[-1] == "MemoryError: my own limit", (status, out, err)
    # a refusal while CPython finalises (a __del__ run as the modules are
    # cleared, catching its MemoryError) is a MemoryError as any other: it
    # exited 2, "out of memory while CPython starts", from inside the
    # allocator (Py_IsInitialized() is false again by then)
    late = ("class A:\n    def __del__(self):\n        try:\n            bytearray(1 << 45)\n"
            "        except MemoryError:\n            print('caught in __del__')\na = A()\n"
            "print('main done')\n")
    status, out, err = run([PYTHON, "-c", late], PYTHON)
    assert (status, out, err) == (0, "main done\ncaught in __del__\n", ""), (status, out, err)
    # under a finite address-space limit the reservation takes at most half
    # of it, as the preloaded library's (it kept the first power of two the
    # kernel took: a 150 MB bytearray failed under `ulimit -v 400000`, and
    # under 60000 neither launcher started; the launchers hunt, session 25)
    import shlex
    for limit, argv, want in ((400000, [PYTHON, "-c", "print(len(bytearray(150 * 10**6)))"],
                               "150000000\n"),
                              (60000, [PYTHON, "-c", "print('ok')"], "ok\n"),
                              (40000, [LUA, "-e", "print('ok')"], "ok\n")):
        status, out, err = run(["sh", "-c", f"ulimit -v {limit} && exec {shlex.join(argv)}"])
        assert (status, out) == (0, want), (limit, argv, status, out, err)
    print("out of memory: one line naming the reservation or the limit and its variable")


def report_write_errors():
    """HEAPLAB_STATS that cannot be written whole: one line with the reason
    -- a full disk cut the report short with no word before -- and the
    program's own exit status (docs/clients.md, "The report": the launchers
    exit as the stock interpreters do)."""
    need(LUA, "heaplab-lua")
    need(PYTHON, "heaplab-python")
    with tempfile.TemporaryDirectory() as d:
        missing = os.path.join(d, "no", "such", "dir", "stats.json")
        for argv, exe, name, code in (
                (["heaplab-lua", "-e", "print(1) os.exit(3)"], LUA, "heaplab-lua", 3),
                (["heaplab-lua", "-e", "print(1)"], LUA, "heaplab-lua", 0),
                ([PYTHON, "-c", "print(1); raise SystemExit(3)"], PYTHON, "heaplab-python", 3),
                ([PYTHON, "-c", "print(1)"], PYTHON, "heaplab-python", 0)):
            for path, why in (("/dev/full", "No space left on device"),
                              (missing, "No such file or directory")):
                status, out, err = run(argv, exe, {"HEAPLAB_STATS": path})
                want = f"{name}: HEAPLAB_STATS={path}: cannot write the report: {why}\n"
                assert (status, out, err) == (code, "1\n", want), (argv, path, status, out, err)
            # set but empty: no report, as unset (a shell's `HEAPLAB_STATS= cmd`)
            status, out, err = run(argv, exe, {"HEAPLAB_STATS": ""}, cwd=d)
            assert (status, out, err, os.listdir(d)) == (code, "1\n", "", []), (argv, status, err)
    print("HEAPLAB_STATS not writable: one line with the reason, the program's exit status")


def launcher_children():
    """HEAPLAB_STATS and the programs a launcher starts: a heaplab-python or
    heaplab-lua started -- directly or through a shell -- by a launcher that
    writes the same report writes path.<pid>, not path (multiprocessing's
    spawn helpers and subprocess.Popen([sys.executable, ...]) exited after
    the launcher and left their report in place of its own); a launcher
    started by one that writes no report writes path itself."""
    need(PYTHON, "heaplab-python")
    need(LUA, "heaplab-lua")

    def children(d):
        return sorted(n for n in os.listdir(d) if n.startswith("stats.json."))

    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        # a child that outlives the launcher: it waits for the end of its stdin,
        # a pipe whose one writer is the launcher's descriptor w, closed when
        # the launcher's process is gone (after its report); run() returns when
        # both have exited, as both hold its stdout
        # (each process says its pid in one write(): "pid=N;", so that the
        # lines of processes that write at once cannot run together)
        say = "import os, sys\nos.write(1, b'pid=%d;' % os.getpid())\n"
        for name, text in (("say.py", say), ("wait.py", say + "sys.stdin.read()\n")):
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        code = (say + "import subprocess\nr, w = os.pipe()\n"
                f"subprocess.Popen([sys.executable, {os.path.join(d, 'wait.py')!r}], stdin=r)\n"
                "os.close(r)\n"
                f"subprocess.run(sys.executable + ' {os.path.join(d, 'say.py')}; true', "
                "shell=True, check=True)\n")
        status, out, err = run([PYTHON, "-c", code], PYTHON, {"HEAPLAB_STATS": path})
        assert status == 0, (status, err)
        parent, *kids = [int(x) for x in re.findall(r"pid=(\d+);", out)]
        assert len(kids) == 2, out
        assert report(path)["pid"] == parent, f"report of pid {report(path)['pid']}, " \
                                              f"launcher {parent} (children {kids})"
        assert children(d) == sorted(f"stats.json.{k}" for k in kids), (children(d), kids)
        for k in kids:
            assert report(f"{path}.{k}")["pid"] == k
        # multiprocessing's spawn: the child and the resource tracker
        for n in children(d):
            os.unlink(os.path.join(d, n))
        code = ("import multiprocessing as mp, os\nif __name__ == '__main__':\n"
                "    p = mp.get_context('spawn').Process(target=os.getpid); p.start(); p.join()\n"
                "    print(os.getpid(), p.pid)\n")
        script = os.path.join(d, "spawn.py")
        with open(script, "w") as f:
            f.write(code)
        status, out, err = run([PYTHON, script], PYTHON, {"HEAPLAB_STATS": path})
        assert status == 0, (status, err)
        parent, kid = [int(x) for x in out.split()]
        assert report(path)["pid"] == parent, (report(path)["pid"], parent, children(d))
        assert f"stats.json.{kid}" in children(d), (kid, children(d))
        # heaplab-lua through os.execute (a shell in between)
        for n in children(d):
            os.unlink(os.path.join(d, n))
        p = subprocess.Popen([LUA, "-e", f"os.execute('{LUA} -e \"print(1)\"')"],
                             env=clean_env({"HEAPLAB_STATS": path}), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0 and out == "1\n", (p.returncode, out, err)
        assert report(path)["pid"] == p.pid, (report(path)["pid"], p.pid)
        kids = children(d)
        assert len(kids) == 1 and report(os.path.join(d, kids[0]))["pid"] != p.pid, kids
        # a launcher that writes no report: its child's report is path itself
        for n in children(d) + ["stats.json"]:
            os.unlink(os.path.join(d, n))
        code = ("import os, subprocess, sys\n"
                "env = dict(os.environ, HEAPLAB_STATS=sys.argv[1])\n"
                "subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], "
                "env=env, check=True)\n")
        status, out, err = run([PYTHON, "-c", code, path], PYTHON)
        assert status == 0, (status, err)
        assert report(path)["pid"] == int(out) and children(d) == [], (out, children(d))
        # a child run as another user cannot read its parent's /proc/PID/exe:
        # it took itself for the first launcher and wrote over the parent's
        # report (or could not write it); the launcher's HEAPLAB_STATS_OWNER
        # tells it (the launchers hunt, session 25)
        if os.geteuid() == 0:
            import pwd
            try:
                pwd.getpwnam("nobody")
            except KeyError:
                pass
            else:
                os.unlink(path)
                os.chmod(d, 0o777)
                code = ("import os, subprocess, sys\nprint(os.getpid())\n"
                        "subprocess.run([sys.executable, '-c', 'import os; print(os.getpid())'], "
                        "user='nobody', check=True)\n")
                status, out, err = run([PYTHON, "-c", code], PYTHON, {"HEAPLAB_STATS": path})
                assert status == 0 and not err, (status, err)
                parent, kid = [int(x) for x in out.split()]
                assert report(path)["pid"] == parent, (report(path)["pid"], parent, kid)
                assert children(d) == [f"stats.json.{kid}"], (children(d), kid)
        # a preloaded program the launcher starts reads the mark too: it wrote
        # path, which the launcher wrote over at its exit (the review, session 25)
        preload = os.environ.get("HEAPLAB_PRELOAD")
        if preload and os.path.exists(preload):
            for n in children(d) + ["stats.json"]:
                if os.path.exists(os.path.join(d, n)):
                    os.unlink(os.path.join(d, n))
            code = ("import os, subprocess, sys\nprint(os.getpid())\n"
                    "p = subprocess.Popen(['ls', '/'], stdout=subprocess.DEVNULL, "
                    f"env=dict(os.environ, LD_PRELOAD={preload!r}))\np.wait()\nprint(p.pid)\n")
            status, out, err = run([PYTHON, "-c", code], PYTHON, {"HEAPLAB_STATS": path})
            assert status == 0 and not err, (status, err)
            parent, kid = [int(x) for x in out.split()]
            assert report(path)["pid"] == parent, (report(path)["pid"], parent, kid)
            assert children(d) == [f"stats.json.{kid}"], (children(d), kid)
            assert report(f"{path}.{kid}")["launcher"] == "libheaplab-malloc.so"
    # a stream (a character device or a FIFO, or a link to one: /dev/stderr)
    # is written in place by the children too: they wrote path.<pid> beside
    # it, a regular file (/dev/stderr.<pid>, as root; the real-programs hunt,
    # session 38).  A link in the test's folder: the old code's file lands there.
    with tempfile.TemporaryDirectory() as d:
        err_link = os.path.join(d, "err")
        os.symlink("/proc/self/fd/2", err_link)   # what /dev/stderr is
        code = ("import subprocess, sys\n"
                "subprocess.run([sys.executable, '-c', 'pass'], check=True)\n")
        status, out, err = run([PYTHON, "-c", code], PYTHON, {"HEAPLAB_STATS": err_link})
        assert status == 0 and os.listdir(d) == ["err"], (status, os.listdir(d), err)
        decoder, at, pids = json.JSONDecoder(), 0, []
        while err[at:].strip():
            at += len(err[at:]) - len(err[at:].lstrip())
            r, at = decoder.raw_decode(err, at)
            pids.append(r["pid"])
        assert len(set(pids)) == 2, (pids, err)
    print("HEAPLAB_STATS: a launcher's exec'd children write path.<pid>, the launcher path; "
          "on a stream each writes in place")


def preloaded_launcher():
    """A launcher run with libheaplab-malloc.so preloaded keeps its own
    report: the library, whose report was written after the launcher's,
    replaced heaplab-lua's (100,000 strings) with its own (35 mallocs); the
    library stays silent in a launcher's process.  And a launcher exec'd by
    a preloaded program that writes the same HEAPLAB_STATS writes
    path.<pid>, the program path (it wrote path, which the program's report
    replaced at its exit) -- the preload hunt, session 32."""
    need(LUA, "heaplab-lua")
    need(PYTHON, "heaplab-python")
    preload = os.environ.get("HEAPLAB_PRELOAD", "")
    need(preload, "libheaplab-malloc.so")
    programs = [(LUA, ["-e", "local t={} for i=1,100000 do t[i]=tostring(i) end"], "heaplab-lua"),
                (PYTHON, ["-c", "x = [str(i) for i in range(100000)]"], "heaplab-python")]
    for exe, args, name in programs:
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "lp.json")
            status, out, err = run([exe] + args, env={"LD_PRELOAD": preload, "HEAPLAB_STATS": path})
            assert status == 0 and not err, (name, status, err)
            r = report(path)
            assert os.listdir(d) == ["lp.json"], (name, os.listdir(d))
            assert r["launcher"] == name and r["stats"]["manual_mallocs"] > 100000, \
                (name, r["launcher"], r["stats"]["manual_mallocs"])
            os.unlink(path)
            # the library's event trace is written all the same (the launchers
            # write none: skipped with the report, it was lost -- the review)
            ev = os.path.join(d, "ev.json")
            status, out, err = run([exe] + args, env={"LD_PRELOAD": preload,
                                                      "HEAPLAB_TRACE_EVENTS": ev})
            assert status == 0 and not err and os.path.getsize(ev) > 0, (name, status, err)
            os.unlink(ev)
            # exec'd by a preloaded bash that writes the same path
            status, out, err = run(["bash", "-c", '"$0" "$@"; true',
                                    exe] + args,
                                   env={"LD_PRELOAD": preload, "HEAPLAB_STATS": path})
            assert status == 0 and not err, (name, status, err)
            files = sorted(os.listdir(d))
            assert len(files) == 2 and files[0] == "lp.json", (name, files)
            assert report(path)["launcher"] == "libheaplab-malloc.so", (name, report(path))
            kid = report(os.path.join(d, files[1]))
            assert kid["launcher"] == name and files[1] == f"lp.json.{kid['pid']}", (name, files)
    print("preloaded launchers: their own report; under a preloaded bash, path.<pid>")


# what a core dump would hold (written mappings without "dd"), and how many of
# the sampled objects (the first, middle and last made) lie in dumped mappings
SMAPS_PY = (
    "import re\n"
    "x = [bytes(100) + str(i).encode() for i in range(400000)]\n"
    "at = [id(x[0]), id(x[len(x) // 2]), id(x[-1])]\n"
    "total = anon = kept = 0\n"
    "for line in open('/proc/self/smaps'):\n"
    "    m = re.match(r'([0-9a-f]+)-([0-9a-f]+) ', line)\n"
    "    if m:\n"
    "        lo, hi, anon = int(m[1], 16), int(m[2], 16), 0\n"
    "    elif line.startswith('Anonymous:'):\n"
    "        anon = int(line.split()[1])\n"
    "    elif line.startswith('VmFlags:') and ' dd' not in line:\n"
    "        total += hi - lo if anon else 0\n"
    "        kept += sum(lo <= a < hi for a in at)\n"
    "print(total, kept)\n")
SMAPS_LUA = (
    "local t = {} for i = 1, 400000 do t[i] = {string.rep('x', 100) .. i} end\n"
    "local at = {}\n"
    "for _, k in ipairs({1, 200000, 400000}) do\n"
    "  at[#at + 1] = tonumber(string.format('%p', t[k]):sub(3), 16) end\n"
    "local total, kept, lo, hi, anon = 0, 0, 0, 0, 0\n"
    "for line in io.lines('/proc/self/smaps') do\n"
    "  local a, b = line:match('^(%x+)%-(%x+) ')\n"
    "  if a then lo, hi, anon = tonumber(a, 16), tonumber(b, 16), 0\n"
    "  elseif line:match('^Anonymous:') then anon = tonumber(line:match('(%d+)'))\n"
    "  elseif line:match('^VmFlags:') and not line:match(' dd') then\n"
    "    if anon > 0 then total = total + (hi - lo) end\n"
    "    for _, p in ipairs(at) do if p >= lo and p < hi then kept = kept + 1 end end\n"
    "  end\n"
    "end\n"
    "print(total, kept)\n")


def exit_in_signal_handler():
    """exit() called by a C signal handler -- libc's exit installed as
    SIGALRM's handler through ctypes (programs/exit_in_handler.py) -- while
    heaplab-python allocates, one-block thread caches (the heap's lock taken
    often): the launcher's report at exit flushed and read the heap under its
    lock, which the interrupted allocation held: 5-8 of 30 runs hung, where
    python3 exits 14 every time (h39exit, session 39).  Each run exits 14
    within 10 s, with the report or one line that the heap was busy.  And
    exit() while a large block's realloc moves it (the heap's lock let go):
    busy, every time (programs/realloc_moving.py); and while the heap's trim
    has its lock let go: busy, every time (programs/exit_in_trim.py)."""
    need(PYTHON, "heaplab-python")
    script = os.path.join(PROGRAMS, "exit_in_handler.py")
    busy = "heaplab-python: the heap is busy at exit"
    status, _, err = run([STOCK_PYTHON, script, "0.01"])
    assert status == 14, ("python3", status, err)
    # exit() while a large block's realloc moves it -- its copy, the heap's
    # lock let go, held at a page made unreadable (programs/realloc_moving.py,
    # libc's exit as SIGSEGV's handler): the block is in no list then, and
    # the report must not read the heap (the busy check's large_moving had no
    # test: the mutation audit, session 40).  Every time: busy, no report.
    moving = os.path.join(PROGRAMS, "realloc_moving.py")
    status, _, err = run([STOCK_PYTHON, moving])
    assert status == 11, ("python3", status, err)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "moving.json")
        status, _, err = run([PYTHON, moving], env={"HEAPLAB_STATS": path}, timeout=10)
        assert status == 11, ("realloc_moving", status, err)
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(busy), ("realloc_moving", err)
        assert not os.path.exists(path), "realloc_moving: a report of the heap mid-move"
    # exit() while the heap's trim has its lock let go, in_cycle set (its half of
    # the busy check had no test: h40left, session 40): 40 MB of small blocks
    # dropped start a trim whose every release is refused with EAGAIN and
    # retried for 100 s, 1 ms apart, the lock let go around each try; the alarm,
    # half a second on, lands in it (programs/exit_in_trim.py).  Every time:
    # busy, no report -- not a report of the heap mid-trim, its pages in flight.
    trim = os.path.join(PROGRAMS, "exit_in_trim.py")
    status, _, err = run([STOCK_PYTHON, trim])
    assert status == 14, ("python3", status, err)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "trim.json")
        status, _, err = run([PYTHON, trim], env={
            "HEAPLAB_STATS": path, "HEAPLAB_FAULT_RELEASE": "always:EAGAIN",
            "HEAPLAB_SYSCALL_RETRY_MAX": "100000", "HEAPLAB_SYSCALL_RETRY_BACKOFF_US": "1000"},
            timeout=10)
        assert status == 14, ("exit_in_trim", status, err)
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith(busy), ("exit_in_trim", err)
        assert not os.path.exists(path), "exit_in_trim: a report of the heap mid-trim"
    runs = 30
    with tempfile.TemporaryDirectory() as d:
        def one(i):
            path = os.path.join(d, f"r{i}.json")
            delay = f"{0.005 + (i * 0.0077) % 0.06:.4f}"
            try:
                status, _, err = run([PYTHON, script, delay],
                                     env={"HEAPLAB_STATS": path, "HEAPLAB_TCACHE_BLOCKS": "1"},
                                     timeout=10)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"run {i} ({delay} s) hung: no exit within 10 s") from None
            assert status == 14, (i, status, err)
            if os.path.exists(path):
                assert report(path)["stats"]["manual_mallocs"] > 0 and not err, (i, err)
                return "report"
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith(busy), (i, err)
            return "busy"

        # (three at a time, as the preload suite's exit_in_signal_handler)
        got = three_at_a_time((one, (i,)) for i in range(runs))
    print(f"exit() from a C SIGALRM handler in heaplab-python: every run exit 14 in time; "
          f"{runs} runs, {got.count('report')} reports, {got.count('busy')} busy")


def exit_module_env():
    """The environment that finds the suite's Lua C module exit_in_handler.so
    (EXIT_MODULE_DIR: Lua has no FFI) -- Missing when it was not built."""
    module_dir = os.environ.get("EXIT_MODULE_DIR")
    if not module_dir or not os.path.exists(os.path.join(module_dir, "exit_in_handler.so")):
        raise Missing("the suite's Lua C module exit_in_handler.so (EXIT_MODULE_DIR)")
    return {"LUA_CPATH": os.path.join(module_dir, "?.so") + ";;"}


def errlock_runs(cmd, env, launcher, runs):
    """The exit_inside_errlock scenarios' runs: cmd (launcher, shim, script)
    in a mount namespace without /proc, the shim preloaded into the launcher
    only (not unshare and sh), each run's script given a delay of its own;
    each run must exit 14 within 10 s with the report (vma_count null) or
    one line that the heap was busy, and one run at least with the report."""
    ns = without_proc()
    busy = f"{launcher}: the heap is busy at exit"
    launcher_path, shim, script = cmd
    with tempfile.TemporaryDirectory() as d:
        def one(i):
            path = os.path.join(d, f"r{i}.json")
            delay = f"{0.05 + (i * 0.0377) % 0.3:.4f}"
            try:
                status, _, err = run(ns + ['umount -l /proc && LD_PRELOAD="$1" exec "$0" "$2" "$3"',
                                           launcher_path, shim, script, delay],
                                     env=dict(env, HEAPLAB_STATS=path), timeout=10)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"run {i} ({delay} s) hung: no exit within 10 s") from None
            assert status == 14, (i, status, err)
            if os.path.exists(path):
                r = report(path)
                assert r["vma_count"] is None and r["stats"]["manual_mallocs"] > 0, r
                assert not err, (i, err)
                return "report"
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith(busy), (i, err)
            return "busy"

        got = three_at_a_time((one, (i,)) for i in range(runs))
    assert "report" in got, got     # (the report is written there, not only refused)
    print(f"exit() from a C SIGALRM handler inside {launcher}'s errlock, without /proc: every "
          f"run exit 14 in time; {runs} runs, {got.count('report')} reports, "
          f"{got.count('busy')} busy")


def exit_inside_errlock():
    """exit() from a C SIGALRM handler that interrupted heaplab-python inside
    the heap's errlock, the heap's lock free (programs/exit_inside_errlock.py:
    a refused calloc in a loop copies its message to the heap there), without
    /proc and with every mutex held 300 us longer (modules/slow_unlock.c,
    preloaded into the launcher only): the report's vma_count fails, and its
    failure's message waited for the errlock its own thread held, for ever
    (4 of 8 runs hung by hand; the preloaded library's case, h39exit, session
    39: hl__errors_at_exit, which report_at_exit calls now -- h40left, session
    40).  Each run exits 14 within 10 s, with the report (vma_count null) or
    one line that the heap was busy.  Needs root for the mount namespace
    (unshare -m): skipped otherwise."""
    need(PYTHON, "heaplab-python")
    shim = os.environ.get("SLOW_UNLOCK")
    need(shim, "the suite's preloaded slow_unlock.so (SLOW_UNLOCK)")
    script = os.path.join(PROGRAMS, "exit_inside_errlock.py")
    status, _, err = run([STOCK_PYTHON, script, "0.05"])
    assert status == 14, ("python3", status, err)
    errlock_runs([PYTHON, shim, script], {}, "heaplab-python", 20)


def exits_in_time(name, cases, runs, busy):
    """Each case (label, argv, exe, env) run `runs` times, three at a time,
    the alarm's delay varied: every run must exit 14 within 10 s, with the
    report (manual_mallocs > 0, nothing on stderr) or the one line `busy`.
    Every failure is listed, with each case's counts."""
    with tempfile.TemporaryDirectory() as d:
        def one(label, argv, exe, env, i):
            path = os.path.join(d, f"r{len(label)}-{abs(hash(label))}-{i}.json")
            delay = f"{0.005 + (i * 0.0077) % 0.06:.4f}"
            what = f"{label}, run {i} ({delay} s)"
            try:
                status, _, err = run(argv(delay), exe, dict(env, HEAPLAB_STATS=path), timeout=10)
            except subprocess.TimeoutExpired:
                return "hung", f"{what}: no exit within 10 s"
            if status != 14:
                return ("aborted" if status == -signal.SIGABRT else "status",
                        f"{what}: status {status}: {err[-300:]!r}")
            if os.path.exists(path):
                try:
                    ok = report(path)["stats"]["manual_mallocs"] > 0 and not err
                except ValueError as e:
                    return "bad report", f"{what}: {e}"
                return ("report", "") if ok else ("bad report", f"{what}: {err!r}")
            lines = err.splitlines()
            if len(lines) == 1 and lines[0].startswith(busy):
                return "busy", ""
            return "no report", f"{what}: {err[-300:]!r}"

        # (three at a time, as exit_in_signal_handler)
        with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
            got = {c[0]: list(pool.map(lambda i, c=c: one(*c, i), range(runs))) for c in cases}
    failed = [why for label in got for kind, why in got[label] if kind not in ("report", "busy")]
    counts = {label: collections.Counter(kind for kind, _ in got[label]) for label in got}
    summary = "; ".join(f"{label}: {dict(c)}" for label, c in counts.items())
    assert not failed, (f"{name}: {len(failed)} of {len(cases) * runs} runs failed ({summary})\n  "
                        + "\n  ".join(failed))
    print(f"{name}: every run exit 14 in time; {runs} runs each, "
          + "; ".join(f"{label}: {c['report']} reports, {c['busy']} busy"
                      for label, c in counts.items()))


def exit_in_glibc_malloc():
    """exit() called by a C SIGALRM handler (libc's exit installed through
    ctypes) that interrupted glibc's OWN allocator: the program calls libc's
    malloc and free through ctypes (programs/exit_in_glibc_malloc.py) -- any
    C code's allocations, which the launchers do not interpose.  The report
    was built in an open_memstream buffer, glibc's: alone, glibc aborted
    (the report's calloc inside the interrupted malloc: "malloc assertion
    failure in sysmalloc", 10 of 20 runs), with three threads the report
    waited for the arena lock its own thread held, for ever (12 of 20 runs);
    python3 exits 14 every time (h40rep, session 40).  Each run exits 14
    within 10 s, with the report or one line that the heap was busy (the
    interpreter's own allocations between the calls are heaplab's)."""
    need(PYTHON, "heaplab-python")
    script = os.path.join(PROGRAMS, "exit_in_glibc_malloc.py")
    for threads in ("1", "3"):
        status, _, err = run([STOCK_PYTHON, script, "0.01", threads], timeout=10)
        assert status == 14, ("python3", threads, status, err)
    exits_in_time("exit() from a C SIGALRM handler inside glibc's malloc in heaplab-python",
                  [(f"{t} thread(s)", lambda delay, t=t: [PYTHON, script, delay, t], None, {})
                   for t in ("1", "3")],
                  20, "heaplab-python: the heap is busy at exit")


def lua_exit_in_signal_handler():
    """exit() called by a C SIGALRM handler in heaplab-lua -- a Lua C module
    built by the suite (modules/exit_in_handler.c: Lua has no FFI) installs
    it -- that interrupted (a) heaplab-lua inside its heap (tables and
    strings, one-block thread caches: the heap's lock taken often), the
    launchers' busy check that exit_in_signal_handler tests on heaplab-python
    (client.c is shared); (b) glibc's own malloc and free, called by the
    module's C code on 1 and on 3 threads, as exit_in_glibc_malloc.  lua5.4
    exits 14 in each; each run of heaplab-lua exits 14 within 10 s, with the
    report or one line that the heap was busy (h40rep, session 40)."""
    need(LUA, "heaplab-lua")
    env = exit_module_env()
    script = os.path.join(PROGRAMS, "exit_in_handler.lua")
    if STOCK_LUA:
        for mode in ("heap", "1", "3"):
            status, _, err = run(["lua5.4", script, mode, "0.01"], STOCK_LUA, env, timeout=10)
            assert status == 14, ("lua5.4", mode, status, err)
    exits_in_time("exit() from a C SIGALRM handler in heaplab-lua",
                  [("in the heap", lambda delay: ["heaplab-lua", script, "heap", delay], LUA,
                    dict(env, HEAPLAB_TCACHE_BLOCKS="1"))]
                  + [(f"glibc's malloc, {t} thread(s)",
                      lambda delay, t=t: ["heaplab-lua", script, t, delay], LUA, env)
                     for t in ("1", "3")],
                  20, "heaplab-lua: the heap is busy at exit")


def lua_exit_inside_errlock():
    """exit_inside_errlock's case in heaplab-lua: exit() from a C SIGALRM
    handler (modules/exit_in_handler.c's arm: Lua has no FFI) that
    interrupted heaplab-lua inside its heap's errlock, the heap's lock free.
    heaplab-lua's own allocations copy no message there (Lua's allocator
    gives every block its exact size, and a refused malloc or realloc fails
    under the heap's lock: the busy check's case), but heaplab.client's
    vma_count does: without /proc it fails, in a loop
    (programs/exit_inside_errlock.lua), each failure's message copied to the
    launcher's heap under errlock.  With every mutex held 300 us longer
    (modules/slow_unlock.c, preloaded into the launcher, armed by the
    module's slow_unlock), the report's own vma_count failure waited for the
    errlock its thread held, for ever, without hl__errors_at_exit in
    report_at_exit: 6 of 6 runs by hand (h41lua, session 41).  Each run exits
    14 within 10 s, with the report (vma_count null) or one line that the
    heap was busy.  Needs root for the mount namespace: skipped otherwise."""
    need(LUA, "heaplab-lua")
    shim = os.environ.get("SLOW_UNLOCK")
    need(shim, "the suite's preloaded slow_unlock.so (SLOW_UNLOCK)")
    env = exit_module_env()
    script = os.path.join(PROGRAMS, "exit_inside_errlock.lua")
    if STOCK_LUA:
        status, _, err = run(["lua5.4", script, "0.05"], STOCK_LUA, env, timeout=10)
        assert status == 14, ("lua5.4", status, err)
    errlock_runs([LUA, shim, script], env, "heaplab-lua", 12)


def core_dump():
    """A core dump of a launcher holds the interpreter's pages, not its heap's
    32 GiB reservation (dump_unused=0 is the launchers' default): the kernel
    dumps each written anonymous mapping whole, zeros down a pipe and in
    gdb's gcore.  Read from /proc/self/smaps as the dumper reads it, after
    ~60 MB of objects: under 512 MiB, with the first, middle and last object
    made in it; with HEAPLAB_DUMP_UNUSED=1 (the C API's default, the
    control) the whole reservation."""
    need(LUA, "heaplab-lua")
    need(PYTHON, "heaplab-python")
    for name, exe, argv in (("heaplab-python", PYTHON, [PYTHON, "-c", SMAPS_PY]),
                            ("heaplab-lua", LUA, ["heaplab-lua", "-e", SMAPS_LUA])):
        sizes = {}
        for unused in ("", "1"):
            status, out, err = run(argv, exe, {"HEAPLAB_DUMP_UNUSED": unused} if unused else {})
            assert status == 0 and not err, (name, unused, status, err)
            size, kept = map(int, out.split())
            assert kept == 3, f"{name}: {3 - kept} of 3 sampled objects left out of a core dump"
            sizes[unused] = size
        assert sizes[""] < 512 << 20, f"{name}: a core dump would hold {sizes[''] >> 20} MiB"
        assert sizes["1"] >= 16 << 30, f"{name} with HEAPLAB_DUMP_UNUSED=1: {sizes['1'] >> 20} MiB"
        print(f"{name}: a core dump would hold {sizes[''] >> 20} MiB "
              f"({sizes['1'] >> 20} MiB with HEAPLAB_DUMP_UNUSED=1)")


SCENARIOS = {f.__name__: f for f in (lua_cli, lua_ldoc, lua_dkjson, lua_luacheck, lua_busted,
                                     lua_report, lua_faults, lua_client_module, python_cli,
                                     python_regrtest, python_faults, python_report,
                                     python_verify_debug_hooks, sparse_survivors,
                                     out_of_memory, report_write_errors,
                                     launcher_children, preloaded_launcher, core_dump,
                                     exit_in_signal_handler, exit_in_glibc_malloc,
                                     exit_inside_errlock, lua_exit_in_signal_handler,
                                     lua_exit_inside_errlock)}


def main(argv):
    if len(argv) != 2 or argv[1] not in SCENARIOS:
        print(f"usage: {argv[0]} SCENARIO   ({', '.join(SCENARIOS)})", file=sys.stderr)
        return 2
    try:
        SCENARIOS[argv[1]]()
    except Missing as e:
        print(f"MISSING: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
