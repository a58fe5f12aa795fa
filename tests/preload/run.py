"""Real, unmodified programs on libheaplab-malloc.so (issue 17), one scenario
per Meson test in suite 'preload' (tests/preload/meson.build):

    python3 tests/preload/run.py SCENARIO

Each runs a stock Debian program with LD_PRELOAD=libheaplab-malloc.so and
HEAPLAB_STATS, checks the program's own verdict (its tests pass, its result
is right, its output equals the same run on glibc), and reads the report to
show that the allocations really were heaplab's.

Paths come from the environment (Meson sets them): HEAPLAB_PRELOAD (the
library), HEAPLAB_PRELOAD_THREADS (the threaded C test),
HEAPLAB_PRELOAD_CONFORMANCE (the API's C test), STOCK_LUA.
"""
import glob
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

PRELOAD = os.environ.get("HEAPLAB_PRELOAD", "")
THREADS = os.environ.get("HEAPLAB_PRELOAD_THREADS", "")
CONFORMANCE = os.environ.get("HEAPLAB_PRELOAD_CONFORMANCE", "")
EDGES = os.environ.get("HEAPLAB_PRELOAD_REPORT_EDGES", "")
OWN_MALLOC = os.environ.get("HEAPLAB_PRELOAD_OWN_MALLOC", "")
MALLOC_ADDRESS = os.environ.get("HEAPLAB_PRELOAD_MALLOC_ADDRESS", "")
EXIT_IN_HANDLER = os.environ.get("HEAPLAB_PRELOAD_EXIT_IN_HANDLER", "")
MALLOC_IN_HANDLER = os.environ.get("HEAPLAB_PRELOAD_MALLOC_IN_HANDLER", "")
LAUNCHER_MARK = os.environ.get("HEAPLAB_PRELOAD_LAUNCHER_MARK", "")
STOCK_PYTHON = "/usr/bin/python3"       # Debian's, not the venv's: its test package is there
STOCK_LUA = os.environ.get("STOCK_LUA") or shutil.which("lua5.4") or ""
SQLITE3 = shutil.which("sqlite3") or "/usr/bin/sqlite3"
PENLIGHT = "/usr/share/lua/5.1/pl"
LUA51_PATH = "/usr/share/lua/5.1/?.lua;/usr/share/lua/5.1/?/init.lua;;"

# CPython's own regression tests: 31 modules that run in about a minute here
# with PYTHONMALLOC=malloc (measured one by one on glibc: test_threading 12 s,
# test_weakref 8 s, test_pickle 6 s, the rest 0.1-3 s; test_subprocess, 28 s,
# is left out: tests/preload/c/preload_threads.c forks and spawns).  Debian
# ships them in libpython3.X-testsuite (tools/setup.sh preload).
# (test_threading last: its test_frame_tstate_tracing leaves threading.settrace
# set for the rest of the process, and every thread started after it calls
# sys.settrace in its bootstrap -- test_functools' test_lru_cache_threaded, five
# threads at a switch interval of 1 us, then failed 'misses 4 != 5' ("Cannot
# install a trace function while another trace function is being installed",
# CPython's own race): 2 of 200 runs of the two on heaplab and 2 of 200 on glibc,
# once in make test, session 36)
REGRTESTS = ["test_list", "test_dict", "test_set", "test_json", "test_gc", "test_unicode",
             "test_bytes", "test_weakref", "test_thread", "test_re",
             "test_string", "test_tuple", "test_deque", "test_heapq", "test_bisect",
             "test_itertools", "test_functools", "test_collections", "test_sort", "test_struct",
             "test_array", "test_fstring", "test_enum", "test_pickle", "test_copy",
             "test_operator", "test_csv", "test_base64", "test_zlib", "test_hashlib",
             "test_threading"]


class Missing(Exception):
    pass


def need(path, what):
    """A missing program fails the scenario (never skips): tools/setup.sh
    installs them all, and a skip would let make test pass without them."""
    if not path or not os.path.exists(path):
        raise Missing(f"{what} is not available ({path or 'not configured'}): "
                      "run tools/setup.sh preload and build with meson")


def env_for(allocator, extra=None):
    """The caller's environment without HEAPLAB_*/LD_PRELOAD/PYTHONMALLOC,
    then the allocator's: 'heaplab' preloads the library, 'glibc' nothing."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("HEAPLAB_") or k in ("LD_PRELOAD", "PYTHONMALLOC"))}
    env["MALLOC_PERTURB_"] = "0"
    if allocator == "heaplab":
        env["LD_PRELOAD"] = PRELOAD
    env.update(extra or {})
    return env


def run(argv, allocator, extra=None, stdin=None, cwd=None, timeout=600):
    p = subprocess.run(argv, env=env_for(allocator, extra), input=stdin, cwd=cwd,
                       capture_output=True, text=True, timeout=timeout, errors="replace")
    return p.returncode, p.stdout, p.stderr


def report(path):
    with open(path) as f:
        d = json.load(f)
    assert d["launcher"] == "libheaplab-malloc.so" and d["allocator"] == "heaplab", d
    return d


def python_regrtest():
    """Stock python3, PYTHONMALLOC=malloc (every object on malloc), passes
    31 of CPython's regression test modules on the preloaded heap."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(STOCK_PYTHON, "Debian's python3")
    minor = subprocess.run([STOCK_PYTHON, "-c", "import sys; print(sys.version_info[1])"],
                           capture_output=True, text=True).stdout.strip()
    need(f"/usr/lib/python3.{minor}/test/test_dict.py",
         f"CPython's regression tests (libpython3.{minor}-testsuite)")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        status, out, err = run([STOCK_PYTHON, "-m", "test", "-q"] + REGRTESTS, "heaplab",
                               {"PYTHONMALLOC": "malloc", "HEAPLAB_STATS": path}, cwd=d,
                               timeout=900)
        tail = "\n".join((out + err).strip().splitlines()[-15:])
        assert status == 0, f"regrtest failed on heaplab (exit {status}):\n{tail}"
        assert "Tests result: SUCCESS" in out, tail
        st = report(path)["stats"]
        children = glob.glob(path + ".*")
        assert st["manual_mallocs"] > 10_000_000, st
    print(f"CPython regrtest, {len(REGRTESTS)} modules: passed on libheaplab-malloc.so "
          f"({st['manual_mallocs']} mallocs, {st['released_pages']} pages released, "
          f"{len(children)} child reports)")


def lua_luacheck():
    """Stock lua5.4 runs luacheck over Penlight (a real Lua program, ~90
    files): the same report and exit status on heaplab as on glibc."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(STOCK_LUA, "lua5.4")
    need("/usr/bin/luacheck", "luacheck (lua-check)")
    args = [STOCK_LUA, "/usr/bin/luacheck", "--no-color", "--codes", "--no-cache", PENLIGHT]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        res = {a: run(args, a, {"LUA_PATH": LUA51_PATH, "HEAPLAB_STATS": path})
               for a in ("heaplab", "glibc")}
        assert res["heaplab"] == res["glibc"], \
            f"luacheck differs:\n heaplab {res['heaplab'][0]} {res['heaplab'][1][-600:]}\n" \
            f" glibc {res['glibc'][0]} {res['glibc'][1][-600:]}"
        status, out, _ = res["heaplab"]
        assert status == 1 and "warnings / 0 errors in" in out, (status, out[-500:])
        st = report(path)["stats"]
        assert st["manual_mallocs"] > 100_000, st
    print("luacheck on lua5.4 + libheaplab-malloc.so:", out.strip().splitlines()[-1],
          f"({st['manual_mallocs']} mallocs)")


SQL = """
PRAGMA journal_mode = MEMORY;
CREATE TABLE t(id INTEGER PRIMARY KEY, k TEXT, v BLOB, n INTEGER);
WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 200000)
INSERT INTO t(id, k, v, n) SELECT i, printf('key-%08d', i), zeroblob(i % 300), i * 7 % 1000 FROM c;
CREATE INDEX t_k ON t(k);
CREATE INDEX t_n ON t(n);
SELECT count(*), sum(n), sum(length(v)), min(k), max(k) FROM t;
SELECT n, count(*) FROM t WHERE n < 5 GROUP BY n ORDER BY n;
DELETE FROM t WHERE id % 3 = 0;
UPDATE t SET v = zeroblob(0), n = n + 1 WHERE id % 5 = 0;
SELECT count(*), sum(n), sum(length(v)) FROM t;
SELECT group_concat(k, ',') FROM (SELECT k FROM t ORDER BY k DESC LIMIT 3);
VACUUM;
PRAGMA integrity_check;
"""


def sqlite_expected():
    """The answers, computed here without SQLite."""
    rows = {i: (f"key-{i:08d}", i % 300, i * 7 % 1000) for i in range(1, 200001)}
    first = (len(rows), sum(r[2] for r in rows.values()), sum(r[1] for r in rows.values()),
             min(r[0] for r in rows.values()), max(r[0] for r in rows.values()))
    groups = sorted((n, sum(1 for r in rows.values() if r[2] == n)) for n in range(5))
    kept = {i: r for i, r in rows.items() if i % 3}
    kept = {i: ((k, 0, n + 1) if i % 5 == 0 else (k, v, n)) for i, (k, v, n) in kept.items()}
    second = (len(kept), sum(r[2] for r in kept.values()), sum(r[1] for r in kept.values()))
    last3 = ",".join(sorted((r[0] for r in kept.values()), reverse=True)[:3])
    lines = ["memory", "|".join(map(str, first))]
    lines += [f"{n}|{c}" for n, c in groups]
    lines += ["|".join(map(str, second)), last3, "ok"]
    return "\n".join(lines)


def sqlite3_script():
    """sqlite3 on a scripted workload (200,000 rows, two indexes, a delete,
    an update, VACUUM, integrity_check): the results are the ones computed
    without SQLite, on heaplab and on glibc."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(SQLITE3, "sqlite3")
    want = sqlite_expected()
    with tempfile.TemporaryDirectory() as d:
        path, trace = os.path.join(d, "stats.json"), os.path.join(d, "events.jsonl")
        for alloc in ("heaplab", "glibc"):
            db = os.path.join(d, f"{alloc}.db")
            status, out, err = run([SQLITE3, db], alloc,
                                   {"HEAPLAB_STATS": path, "HEAPLAB_TRACE_EVENTS": trace},
                                   stdin=SQL)
            assert status == 0 and not err, (alloc, status, err)
            assert out.strip() == want, f"{alloc}: sqlite3 printed\n{out}\nexpected\n{want}"
        st = report(path)["stats"]
        assert st["manual_mallocs"] > 100_000, st
        # HEAPLAB_TRACE_EVENTS: the heap's events, one JSON object a line, with
        # the keys of the bindings' events (Python's Event.as_dict(), Lua's
        # h:events()): the kind was keyed "event" here
        with open(trace) as f:
            events = [json.loads(line) for line in f]
        keys = {"kind", "cycle", "time_ns"}
        assert all(keys <= e.keys() for e in events), [e for e in events if not keys <= e.keys()][:3]
        kinds = {e["kind"] for e in events}
        assert "heap_created" in kinds and "trim" in kinds, kinds
        trims = [e for e in events if e["kind"] == "trim"]
        assert sum(e["released"] for e in trims) == st["released_pages"], (trims[:3], st)
    print(f"sqlite3: results checked on heaplab and glibc ({st['manual_mallocs']} mallocs, "
          f"{len(trims)} trims traced)")


def c_threads():
    """The 8-thread C test (cross-thread frees, fork from the threaded
    parent, posix_spawn) on the preloaded library; its report shows the
    threads' caches went home when they exited (little live at exit), and a
    report from the spawned program under its pid."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(THREADS, "the threaded C test")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        status, out, err = run([THREADS], "heaplab", {"HEAPLAB_STATS": path})
        assert status == 0 and out.startswith("ok:"), (status, out, err)
        st = report(path)["stats"]
        # 240,000 blocks passed between threads; 8 thread caches of up to
        # 64 KiB per class would leave megabytes live if they stayed
        assert st["manual_mallocs"] > 480_000, st
        assert st["small_live_bytes"] < 512 * 1024, st
        # the 5 fork children end with _exit (written since the library has
        # its own _exit: none before) and the spawned program with exit()
        children = [report(c) for c in glob.glob(path + ".*")]
        pids = {c["pid"] for c in children} | {report(path)["pid"]}
        assert len(children) == 6 and len(pids) == 7, [c["pid"] for c in children]
        assert all(c["stats"]["manual_mallocs"] > 2000 for c in children), children
        # %p: every process's report under its own pid
        pct = os.path.join(d, "r.%p.json")
        status, _, err = run([THREADS], "heaplab", {"HEAPLAB_STATS": pct})
        assert status == 0, err
        named = sorted(glob.glob(os.path.join(d, "r.*.json")))
        assert len(named) == 7 and all(
            os.path.basename(n) == f"r.{report(n)['pid']}.json" for n in named), named
    print(out.strip(), f"| live at exit {st['small_live_bytes']} bytes")


def bad_option():
    """A bad HEAPLAB_ value: one line on stderr naming it, and the program
    runs on the system allocator (a malloc cannot refuse to start it).  On
    the system allocator -- that fallback, HEAPLAB_ALLOCATOR=libc -- the
    report says "allocator": "libc" and HEAPLAB_TRACE_EVENTS' file is
    written empty (it was not written and nothing said why: the h34real
    helper)."""
    need(PRELOAD, "libheaplab-malloc.so")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        status, out, err = run([STOCK_PYTHON, "-c", "print(sum(range(10)))"], "heaplab",
                               {"HEAPLAB_PAGE_SIZE": "3000", "HEAPLAB_STATS": path,
                                "HEAPLAB_TRACE_EVENTS": path + ".events"})
        assert status == 0 and out == "45\n", (status, out, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and "HEAPLAB_PAGE_SIZE=3000" in lines[0] and \
            "using the system allocator" in lines[0], err
        with open(path) as f:
            assert json.load(f)["allocator"] == "libc"
        with open(path + ".events") as f:
            assert f.read() == ""
        events = os.path.join(d, "libc.events")
        status, out, err = run([STOCK_PYTHON, "-c", "print(2)"], "heaplab",
                               {"HEAPLAB_ALLOCATOR": "libc", "HEAPLAB_TRACE_EVENTS": events})
        assert status == 0 and out == "2\n" and not err, (status, out, err)
        with open(events) as f:
            assert f.read() == ""
        status, out, err = run([STOCK_PYTHON, "-c", "print(1)"], "heaplab",
                               {"HEAPLAB_ALLOCATOR": "jemalloc"})
        assert status == 0 and out == "1\n" and err.count("\n") == 1 and \
            "HEAPLAB_ALLOCATOR=jemalloc" in err, (status, out, err)
        # values each good that cannot go together: the line names the
        # variables (it said "option subpage_release: needs page_release ...",
        # no variable, and "option page_size: 5120 is not a power of two":
        # h36opt) -- past the small_max the library lowers to fit the 4 KiB pages
        status, out, err = run([STOCK_PYTHON, "-c", "print(3)"], "heaplab",
                               {"HEAPLAB_PAGE_SIZE": "4096", "HEAPLAB_SUBPAGE_RELEASE": "1",
                                "HEAPLAB_PAGE_RELEASE": "0"})
        assert status == 0 and out == "3\n" and err.count("\n") == 1 and err.startswith(
            "libheaplab-malloc: environment HEAPLAB_SUBPAGE_RELEASE=1: option subpage_release: "
            "needs page_release") and "; HEAPLAB_PAGE_RELEASE=0)" in err and \
            "using the system allocator" in err, (status, out, err)
        status, out, err = run([STOCK_PYTHON, "-c", "print(4)"], "heaplab",
                               {"HEAPLAB_PAGE_SIZE": "5k"})
        assert status == 0 and out == "4\n" and err == (
            "libheaplab-malloc: environment HEAPLAB_PAGE_SIZE=5k: option page_size: 5120 is not "
            "a power of two; using the system allocator\n"), (status, out, err)
    print("bad option:", lines[0])


def small_page_option():
    """A valid HEAPLAB_PAGE_SIZE below the library's default small_max's
    needs (16 KiB blocks need 64 KiB pages): the library lowers its own
    default to page_size/4 and runs on heaplab, silently.  (It refused the
    value and ran the program on glibc: 4 KiB pages did not fit 16 KiB
    blocks.)  A small_max the user sets is still checked."""
    need(PRELOAD, "libheaplab-malloc.so")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        status, out, err = run([STOCK_PYTHON, "-c", "print(len([str(i) * 9 for i in range(99999)]))"],
                               "heaplab", {"HEAPLAB_PAGE_SIZE": "4096", "HEAPLAB_STATS": path,
                                           "PYTHONMALLOC": "malloc"})
        assert status == 0 and out == "99999\n" and not err, (status, out, err)
        rep = report(path)
        assert rep["options"]["page_size"] == 4096 and rep["options"]["small_max"] == 1024, \
            rep["options"]
        assert rep["stats"]["manual_mallocs"] > 100_000, rep["stats"]
        status, out, err = run([STOCK_PYTHON, "-c", "print(1)"], "heaplab",
                               {"HEAPLAB_PAGE_SIZE": "4096", "HEAPLAB_SMALL_MAX": "2048"})
        # (one line naming both variables: it said "option small_max: 2048
        # exceeds page_size/4 = 1024", no variable -- the thirty-fourth note)
        assert status == 0 and out == "1\n" and err.startswith(
            "libheaplab-malloc: environment HEAPLAB_SMALL_MAX=2048: option small_max: 2048 "
            "exceeds page_size/4 = 1024") and "HEAPLAB_PAGE_SIZE=4096" in err and \
            err.count("\n") == 1 and "using the system allocator" in err, (status, out, err)
    print("HEAPLAB_PAGE_SIZE=4096: small_max 1024 on heaplab "
          f"({rep['stats']['manual_mallocs']} mallocs); a small_max set too large: one line")


def collected_only_options():
    """HEAPLAB_GENERATIONAL=1 and HEAPLAB_COLLECTOR=background, exported for a
    program's collected heaps: the preloaded (manual) heap ignores them and
    the program runs on heaplab, silently.  (hl_options_validate refuses both
    on a manual heap since the option hunt of session 31; before, the manual
    heap took generational=true and counted as needing the write barrier.)
    HEAPLAB_COMPACT too (it was refused: one line, the system allocator)."""
    need(PRELOAD, "libheaplab-malloc.so")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "stats.json")
        status, out, err = run([STOCK_PYTHON, "-c", "print(sum(range(10)))"], "heaplab",
                               {"HEAPLAB_GENERATIONAL": "1", "HEAPLAB_COLLECTOR": "background",
                                "HEAPLAB_STATS": path})
        assert status == 0 and out == "45\n" and not err, (status, out, err)
        rep = report(path)
        assert rep["allocator"] == "heaplab", rep["allocator"]
        assert rep["options"]["generational"] is False and \
            rep["options"]["collector"] == "sync", rep["options"]
        # the triggers' cross-check too (HEAPLAB_GC_TRIGGER_BYTES=65536, under
        # its default minimum, sent the program to glibc), and an unknown
        # variable's warning starts as the library's other lines (it said
        # "heaplab: warning:") -- the preload hunt, session 32
        os.unlink(path)
        status, out, err = run([STOCK_PYTHON, "-c", "print(sum(range(10)))"], "heaplab",
                               {"HEAPLAB_GC_TRIGGER_BYTES": "65536", "HEAPLAB_NO_SUCH": "1",
                                "HEAPLAB_STATS": path})
        assert status == 0 and out == "45\n", (status, out, err)
        assert err.splitlines() == ["libheaplab-malloc: warning: HEAPLAB_NO_SUCH is not an "
                                    "option (ignored)"], err
        assert report(path)["allocator"] == "heaplab", report(path)["allocator"]
        # ... and so does the counters file's (it still said "heaplab:" --
        # the last read of that change)
        bad = os.path.join(os.path.dirname(path), "no", "counters")
        status, out, err = run([STOCK_PYTHON, "-c", "print(1)"], "heaplab",
                               {"HEAPLAB_COUNTERS_FILE": bad})
        assert status == 0 and out == "1\n" and err.splitlines() == [
            f"libheaplab-malloc: warning: HEAPLAB_COUNTERS_FILE={bad}: cannot open it: No such "
            "file or directory (no counters)"], (status, out, err)
        # HEAPLAB_COMPACT too, since session 33 (the core ignores the collector's
        # switches the environment gives on any manual heap: hl_options_from_env)
        os.unlink(path)
        status, out, err = run([STOCK_PYTHON, "-c", "print(1)"], "heaplab",
                               {"HEAPLAB_COMPACT": "sparse", "HEAPLAB_STATS": path})
        assert status == 0 and out == "1\n" and not err, (status, out, err)
        rep = report(path)
        assert rep["allocator"] == "heaplab" and rep["options"]["compact"] == "never", rep
        # every collected-only option, not a hand list: HEAPLAB_YOUNG_MIN_BYTES=64m
        # (above young_bytes) sent the program to the system allocator -- "option
        # young_min_bytes: 67108864 exceeds young_bytes ..." (the review of
        # session 33); the nursery's other knobs, the pacing's, were taken silently
        for env in ({"HEAPLAB_YOUNG_MIN_BYTES": "64m"},
                    {"HEAPLAB_YOUNG_BYTES": "64k", "HEAPLAB_YOUNG_SURVIVAL_FACTOR": "3",
                     "HEAPLAB_PACING_MAX_WAIT_MS": "7", "HEAPLAB_TENURE_FULL_MARKS": "0",
                     "HEAPLAB_GC_GROWTH_RATIO": "0", "HEAPLAB_MIN_CYCLE_INTERVAL_MS": "5"}):
            os.unlink(path)
            status, out, err = run(["/bin/true"], "heaplab", dict(env, HEAPLAB_STATS=path))
            assert status == 0 and not err, (env, status, out, err)
            rep = report(path)
            assert rep["allocator"] == "heaplab", (env, rep["allocator"])
            defaults = {"young_min_bytes": 4 << 20, "young_bytes": 32 << 20,
                        "young_survival_factor": 16, "pacing_max_wait_ms": 1000,
                        "tenure_full_marks": 16, "gc_growth_ratio": 100,
                        "min_cycle_interval_ms": 0}
            for var in env:
                name = var[len("HEAPLAB_"):].lower()
                assert rep["options"][name] == defaults[name], (var, rep["options"][name])
    print("HEAPLAB_GENERATIONAL=1 HEAPLAB_COLLECTOR=background, every collected-only option: "
          "on heaplab, ignored")


def verify_refuses():
    """HEAPLAB_VERIFY=1 catches the program's double frees and its realloc of
    a freed block, small or large (a freed large block stays in a quarantine,
    also one that realloc moved, and a write through it is harmless), and a
    free or realloc of a pointer inside a live large block,
    refuses them (the block is not handed out twice), and says
    so on stderr: one line each for the first 10, then one more.  (They were
    refused in silence: recorded only in the heap's error.)"""
    need(PRELOAD, "libheaplab-malloc.so")
    need(CONFORMANCE, "the conformance C test")
    status, out, err = run([CONFORMANCE, "--misuse"], "heaplab", {"HEAPLAB_VERIFY": "1"})
    assert status == 0, (status, out, err)
    assert out.splitlines() == ["malloc_usable_size of a freed block: 0",
                                "double free: refused",
                                "realloc of a freed block: NULL, errno 22",
                                "malloc_usable_size of a freed large block: 0",
                                "large double free: refused",
                                "realloc of a freed large block: NULL, errno 22",
                                "after free: malloc_usable_size 0",
                                "after free: free: refused",
                                "after free: realloc: NULL, errno 22",
                                "realloc to a larger block: moved",
                                "after realloc moved it: malloc_usable_size 0",
                                "after realloc moved it: free: refused",
                                "after realloc moved it: realloc: NULL, errno 22",
                                "realloc to a small block: moved",
                                "after realloc made it small: malloc_usable_size 0",
                                "after realloc made it small: free: refused",
                                "after realloc made it small: realloc: NULL, errno 22",
                                "free inside a live large block: refused",
                                "realloc inside a live large block: NULL, errno 22"], out
    lines = err.splitlines()
    assert len(lines) == 11 and all(l.startswith("libheaplab-malloc: ") for l in lines), err
    # (the block is in the core's quarantine: not handed out again yet)
    assert "is a freed block (double free?): refused" in lines[0], lines[0]
    assert "realloc:" in lines[1] and "not a live block" in lines[1], lines[1]
    # a large block's: it went to glibc as a foreign pointer, which aborted
    assert "free:" in lines[2] and "freed large block (double free?)" in lines[2], lines[2]
    assert "realloc:" in lines[3] and "freed large block" in lines[3], lines[3]
    # a large block realloc moved (grown, or made small) is refused as one
    # free() freed: it was freed by the system realloc, past the quarantine
    # (its second free went to glibc, which aborted)
    for k in range(4, 10):
        assert ("free:" if k % 2 == 0 else "realloc:") in lines[k] and \
            "freed large block" in lines[k], (k, lines[k])
    assert lines[10] == "libheaplab-malloc: further refused calls not shown", lines[10]
    # the quarantine of freed large blocks holds at most 64 MiB (the mutation
    # hunt, session 25: without the bytes' bound, 60 freed blocks of 4 MiB
    # stayed resident, 242 MiB)
    need(STOCK_PYTHON, "Debian's python3")
    prog = ("for i in range(60):\n    b = b'x' * (4 << 20)\n    del b\n"
            "print([l for l in open('/proc/self/status') if l.startswith('VmRSS')][0].split()[1])")
    status, out, err = run([STOCK_PYTHON, "-c", prog], "heaplab",
                           {"HEAPLAB_VERIFY": "1", "PYTHONMALLOC": "malloc"})
    assert status == 0 and int(out) < 128 << 10, (status, out, err)
    # free_sized with a size that is not the block's: refused (the core's
    # sized-free check); it was freed in silence, the size ignored
    status, out, err = run([CONFORMANCE, "--free-sized-wrong"], "heaplab", {"HEAPLAB_VERIFY": "1"})
    assert status == 0 and out.splitlines() == [
        "free_sized(40-byte block, 4000): usable 48",
        "free_sized(100000-byte block, 600): live",
        "then with their sizes: usable 0, 0"], (status, out, err)
    fs = err.splitlines()
    assert len(fs) == 2 and "freed with size 4000 but its block holds 48: refused" in fs[0] and \
        "freed with size 600 but its block holds 100000" in fs[1], err
    # free_sized of an aligned block says so; free_aligned_sized is checked
    # (the preload hunt, session 32: "its block holds 128", nothing about
    # alignment; free_aligned_sized freed whatever it was given)
    status, out, err = run([CONFORMANCE, "--free-aligned-sized"], "heaplab",
                           {"HEAPLAB_VERIFY": "1"})
    assert status == 0 and out.splitlines() == [
        "free_sized(aligned 64, 100): live",
        "free_aligned_sized(aligned 64, 64, 100): freed",
        "free_aligned_sized(aligned 256 of 300, 256, 5000): live",
        "free_aligned_sized(aligned 256 of 300, 3, 300): live",
        "free_aligned_sized(aligned 256 of 300, 256, 300): freed"], (status, out, err)
    fs = err.splitlines()
    assert len(fs) == 3 and "free it with free_aligned_sized): refused" in fs[0] and \
        "freed with alignment 256 and size 5000" in fs[1] and \
        "not a power of two" in fs[2], err
    print("HEAPLAB_VERIFY=1:", lines[0])


def verify_aborts_on_damage():
    """HEAPLAB_VERIFY=1 catches a write into a freed block and an overflow into
    the free block after a live one -- when a malloc is about to hand the
    damaged block out, when it leaves the quarantine, at malloc_trim and at
    exit (hl_heap_check) -- says where on stderr and aborts, as glibc aborts
    on the corruption it detects.  Nothing ran a check: the program went on
    with the damage unseen, exit 0 (the verify hunt, session 29)."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(CONFORMANCE, "the conformance C test")
    for how in ("write-after-free", "overflow"):
        for end in ("malloc", "trim", "exit"):
            status, out, err = run([CONFORMANCE, "--damage", how, end], "heaplab",
                                   {"HEAPLAB_VERIFY": "1"})
            lines = err.splitlines()
            assert status == -6, (how, end, status, out, err)
            assert len(lines) == 1 and lines[0].startswith("libheaplab-malloc: HEAPLAB_VERIFY: "), \
                (how, end, err)
            assert "was written after it was freed" in lines[0], (how, end, err)
            # (at exit: after the program's last words)
            assert out == ("" if end != "exit" else f"{how}, then exit: not caught\n"), \
                (how, end, out)
            # without verify: trusted, as glibc's fast paths trust it
            status, out, err = run([CONFORMANCE, "--damage", how, end], "heaplab")
            assert status == 0 and err == "", (how, end, status, err)
    print("HEAPLAB_VERIFY=1: damage caught:", lines[0])


def clearenv_first():
    """A program that calls clearenv() before its first malloc runs on
    heaplab (its malloc_stats has the heaplab section).  The heap waited
    for environ, which clearenv sets to NULL: the program ran on glibc."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(CONFORMANCE, "the conformance C test")
    status, out, err = run([CONFORMANCE, "--clearenv-first"], "heaplab")
    assert status == 0, (status, out, err)
    assert "heaplab small blocks (libheaplab-malloc.so):" in err, err
    print("clearenv() before the first malloc: on heaplab")


def stats_relative_path():
    """A relative HEAPLAB_STATS (and HEAPLAB_TRACE_EVENTS) names a file in
    the directory the program started in, whatever directory it is in when
    it exits (the report was written relative to the directory at exit: a
    server that moved to its data directory, or to /, left it there or
    failed to write it)."""
    need(PRELOAD, "libheaplab-malloc.so")
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "sub"))
        prog = "import os; os.chdir('sub'); print(len([str(i) * 9 for i in range(9999)]))"
        status, out, err = run([STOCK_PYTHON, "-c", prog], "heaplab",
                               {"HEAPLAB_STATS": "stats.json", "HEAPLAB_TRACE_EVENTS": "events",
                                "PYTHONMALLOC": "malloc"}, cwd=d)
        assert status == 0 and out == "9999\n" and not err, (status, out, err)
        moved = sorted(os.listdir(os.path.join(d, "sub")))
        assert not moved, f"reports written in the directory at exit: {moved}"
        rep = report(os.path.join(d, "stats.json"))
        assert rep["stats"]["manual_mallocs"] > 9999, rep["stats"]
        assert os.path.exists(os.path.join(d, "events")), sorted(os.listdir(d))
    print("relative HEAPLAB_STATS: written where the program started")


def stats_write_errors():
    """A report that cannot be written whole says so, with the reason: a
    full disk (/dev/full) cut it short with no word before; the program's
    exit status is its own (docs/clients.md, "The report")."""
    need(PRELOAD, "libheaplab-malloc.so")
    status, out, err = run([STOCK_PYTHON, "-c", "import sys; sys.exit(3)"], "heaplab",
                           {"HEAPLAB_STATS": "/dev/full", "HEAPLAB_TRACE_EVENTS": "/dev/full",
                            "PYTHONMALLOC": "malloc"})
    assert status == 3, (status, err)
    for var in ("HEAPLAB_STATS", "HEAPLAB_TRACE_EVENTS"):
        line = f"libheaplab-malloc: {var}=/dev/full: cannot write /dev/full: No space left on device"
        assert line in err.splitlines(), (var, err)
    # a path of some 3 KiB: the line is whole, its reason at the end (it was
    # cut at 1 KiB, the reason lost -- the review, session 32)
    long = "/nonexistent/" + "a" * 200 + ("/" + "b" * 200) * 14 + "/r.json"
    status, out, err = run(["true"], "heaplab", {"HEAPLAB_STATS": long})
    assert status == 0 and err.splitlines() == [
        f"libheaplab-malloc: HEAPLAB_STATS={long}: cannot write {long}: "
        "No such file or directory"], (status, len(err), err[-200:])
    # a path past the 4,095 bytes a report's name may have, its directories
    # there: it was cut to 4,095 without a word and the report written under
    # the shorter name; now one line each and nothing written
    with tempfile.TemporaryDirectory() as d:
        deep = os.path.join(d, *["a" * 250] * 16)
        os.makedirs(deep)
        env = {"HEAPLAB_STATS": os.path.join(deep, "s" * 200),
               "HEAPLAB_TRACE_EVENTS": os.path.join(deep, "e" * 200)}
        assert all(len(v) > 4095 for v in env.values()), [len(v) for v in env.values()]
        status, out, err = run(["true"], "heaplab", env)
        assert status == 0 and os.listdir(deep) == [], (status, os.listdir(deep), err)
        assert err.splitlines() == [
            f"libheaplab-malloc: {var}: a path of {len(env[var])} bytes, longer than the 4095 a "
            "report's name may have: no report written"
            for var in ("HEAPLAB_STATS", "HEAPLAB_TRACE_EVENTS")], err
    # the report's buffer refused by the kernel at exit: RLIMIT_AS set to the
    # address space in use (the first page not mapped), or to it and one page
    # more (a heap's report, 4.2 KiB: its first page not doubled, mremap) --
    # preload_report_edges.c no_room.  One line with the reason, the exit
    # status the program's, no file (none cut short), no temporary left.
    # (That path had no test: h40rep.)
    need(EDGES, "test_preload_report_edges")
    for allocator, room in (("heaplab", 0), ("heaplab", 4096), ("libc", 0)):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "r.json")
            status, out, err = run([EDGES, "no_room", str(room)], "heaplab",
                                   {"HEAPLAB_STATS": path, "HEAPLAB_ALLOCATOR": allocator},
                                   timeout=60)
            assert status == 7 and err.splitlines() == [
                f"libheaplab-malloc: HEAPLAB_STATS={path}: cannot write {path}: "
                "Cannot allocate memory"], (allocator, room, status, err)
            assert os.listdir(d) == [], (allocator, room, os.listdir(d))
    print("reports that cannot be written (a full disk, no such folder, a path too long, no "
          "address space left for the report's buffer): one line each, with the reason")


def stderr_without_reader():
    """The library's lines on a stderr that is a pipe nobody reads (`prog
    2>&1 | head -1` after head has gone) leave the program alone: the
    bad-option line at the first malloc killed it with SIGPIPE before it did
    anything (status 141), the "cannot write" line at exit turned its status
    into 141, the unknown-variable warning too."""
    need(PRELOAD, "libheaplab-malloc.so")
    with tempfile.TemporaryDirectory() as d:
        cases = [(["touch", os.path.join(d, "bad")], {"HEAPLAB_PAGE_SIZE": "3000"}, 0),
                 (["touch", os.path.join(d, "unknown")], {"HEAPLAB_NO_SUCH_OPTION": "1"}, 0),
                 (["sh", "-c", "exit 3"], {"HEAPLAB_STATS": os.path.join(d, "no", "r.json")}, 3)]
        for argv, extra, want in cases:
            r, w = os.pipe()
            os.close(r)     # (no reader: a write raises SIGPIPE, then EPIPE)
            try:
                p = subprocess.run(argv, env=env_for("heaplab", extra), stdin=subprocess.DEVNULL,
                                   stdout=subprocess.DEVNULL, stderr=w, timeout=60)
            finally:
                os.close(w)
            assert p.returncode == want, (argv, extra, p.returncode)
        assert os.path.exists(os.path.join(d, "bad")) and os.path.exists(os.path.join(d, "unknown"))
    print("stderr without a reader: the programs ran and kept their exit status")


def exit_from_many_threads():
    """Threads that call exit() at once (tests/preload/c/preload_report_
    edges.c, two_exits): the report is there, whole, and no .tmp file is
    left, whichever thread ends the process.  In glibc 2.36 a second exit()
    finds the exit handlers gone -- the first runs the last, _dl_fini, where
    the report is written -- and _exit()s under the writer: 128 reports in
    200 runs, a .tmp left (the preload hunt, session 32).  A third exit()
    still found the list empty in the moment the library's waiting handler
    took to register itself again (1 of 500 runs of eight threads; the
    fresh-clone CI of session 33): the program's getpid() makes that moment
    2 ms, and the runs of four and eight threads lost every report before
    the library's exit() made the later callers wait."""
    need(EDGES, "test_preload_report_edges")
    with tempfile.TemporaryDirectory() as d:
        runs = [(["2"], i) for i in range(20)] + [(["4"], i) for i in range(10)] + \
            [(["8"], i) for i in range(10)] + [(["4", "return"], i) for i in range(10)] + \
            [(["4", "errx"], i) for i in range(10)] + [(["8", "errx"], i) for i in range(10)]
        for args, i in runs:
            sub = os.path.join(d, f"{'-'.join(args)}.{i}")
            os.mkdir(sub)
            status, out, err = run([EDGES, "two_exits", *args], "heaplab",
                                   {"HEAPLAB_STATS": os.path.join(sub, "r.%p.json")}, timeout=30)
            assert status == 0, (args, i, status, err)
            if "errx" in args:   # (errx's lines, interleaved across the threads)
                assert "exits" in err and "libheaplab" not in err, (args, i, err)
            files = os.listdir(sub)
            assert len(files) == 1 and files[0].startswith("r.") and \
                files[0].endswith(".json"), (args, i, files, err)
            assert report(os.path.join(sub, files[0]))["stats"]["manual_mallocs"] > 0
    print("exit() from 2, 4 and 8 threads at once, main returning beside 3, errx() from 4 and "
          "8: 70 runs, 70 whole reports, no .tmp")


def two_copies():
    """Two copies of the library preloaded (the build's and the Python
    package's, LD_PRELOAD="$P <venv>/.../libheaplab-malloc.so"): the one
    whose malloc is the process's writes the report, the other stays inert
    -- it set up a heap of its own at exit and wrote its blank report over
    the real one (the preload hunt, session 32)."""
    need(PRELOAD, "libheaplab-malloc.so")
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, "other"))
        copy = os.path.join(d, "other", "libheaplab-malloc.so")
        shutil.copy(PRELOAD, copy)
        path = os.path.join(d, "q.json")
        status, out, err = run([STOCK_PYTHON, "-c", "x = [str(i) for i in range(100000)]"],
                               "heaplab", {"LD_PRELOAD": f"{PRELOAD} {copy}",
                                           "HEAPLAB_STATS": path, "PYTHONMALLOC": "malloc"})
        assert status == 0 and not err, (status, err)
        assert sorted(os.listdir(d)) == ["other", "q.json"], os.listdir(d)
        r = report(path)
        assert r["stats"]["manual_mallocs"] > 100000, r["stats"]["manual_mallocs"]
        # a malloc wrapper preloaded first (glibc's libmemusage.so forwards
        # with RTLD_NEXT) is no copy: taken for one, the library went inert,
        # the wrapper's calls went to glibc and bash aborted in realloc
        # ("mremap_chunk(): invalid pointer"; the review, session 32)
        memusage = next((p for p in ("/usr/lib/x86_64-linux-gnu/libmemusage.so",
                                     "/lib/x86_64-linux-gnu/libmemusage.so",
                                     "/usr/lib/aarch64-linux-gnu/libmemusage.so")
                         if os.path.exists(p)), None)
        if memusage:
            path = os.path.join(d, "w.json")
            status, out, err = run(["bash", "-c", "x=$(seq 1 20000); echo ${#x}"], "heaplab",
                                   {"LD_PRELOAD": f"{memusage} {PRELOAD}",
                                    "MEMUSAGE_OUTPUT": "/dev/null", "HEAPLAB_STATS": path})
            assert status == 0 and out.split()[0] == "108893", (status, out, err)
            assert report(path)["stats"]["manual_mallocs"] > 100, report(path)["stats"]
        else:
            print("(no libmemusage.so here: the wrapper's half not run)")
    print("two copies preloaded: the first's report, the second inert; a wrapper first is none")


def renamed_copy():
    """A copy of the library under another name: a program exec'd by a
    preloaded bash with the same HEAPLAB_STATS writes path.<pid> (the child
    knew its parent preloaded by the name libheaplab-malloc in its maps: a
    renamed copy's children wrote path, and the shell's report replaced
    theirs -- the preload hunt, session 32)."""
    need(PRELOAD, "libheaplab-malloc.so")
    with tempfile.TemporaryDirectory() as d:
        copy = os.path.join(d, "libmine.so")
        shutil.copy(PRELOAD, copy)
        path = os.path.join(d, "r.json")
        status, out, err = run(["bash", "-c", 'ls / >/dev/null; echo $!'], "heaplab",
                               {"LD_PRELOAD": copy, "HEAPLAB_STATS": path})
        assert status == 0 and not err, (status, err)
        files = sorted(f for f in os.listdir(d) if f.startswith("r.json"))
        assert len(files) == 2 and files[0] == "r.json", files
        assert report(path)["interpreter"].endswith("bash"), report(path)["interpreter"]
        assert report(os.path.join(d, files[1]))["interpreter"].endswith("ls"), files
        # a child on another copy of the same name (the parent on the build's,
        # the child on the Python package's; a rebuilt library under a shell
        # preloaded with the old file): told by the name -- matching only this
        # copy's file, the shell's report replaced the child's (the review)
        other = os.path.join(d, "elsewhere")
        os.mkdir(other)
        shutil.copy(PRELOAD, os.path.join(other, "libheaplab-malloc.so"))
        path = os.path.join(d, "c.json")
        status, out, err = run(["bash", "-c", f'LD_PRELOAD={other}/libheaplab-malloc.so '
                                "ls / >/dev/null; true"], "heaplab",
                               {"LD_PRELOAD": PRELOAD, "HEAPLAB_STATS": path})
        assert status == 0 and not err, (status, err)
        files = sorted(f for f in os.listdir(d) if f.startswith("c.json"))
        assert len(files) == 2 and files[0] == "c.json", files
        assert report(os.path.join(d, files[1]))["interpreter"].endswith("ls"), files
    print("a renamed copy: bash writes path, the ls it ran path.<pid>; so with another copy")


def exit_inside_exit():
    """exit() inside exit (tests/preload/c/preload_report_edges.c): a
    destructor of the program that calls exit(3), one that forks a child
    calling exit(0) -- each ends, with its status, in a few seconds.  The
    library's wait for the report's writer (exit_from_many_threads) waited
    for ever in both: for the thread it ran on, and in a child for its
    parent's writer (the review of that wait, session 32)."""
    need(EDGES, "test_preload_report_edges")
    with tempfile.TemporaryDirectory() as d:
        for what, want in (("exit_in_destructor", 3), ("fork_in_destructor", 0)):
            t0 = time.monotonic()
            status, out, err = run([EDGES, what], "heaplab",
                                   {"HEAPLAB_STATS": os.path.join(d, what + ".json")},
                                   timeout=30)
            took = time.monotonic() - t0
            assert status == want and took < 10, (what, status, took, err)
        # the parent of the fork writes its report
        assert report(os.path.join(d, "fork_in_destructor.json"))["stats"]["manual_mallocs"] > 0
    print("exit() inside exit: both ended with their status")


def report_edges():
    """The report where a program ends in ways real programs do
    (tests/preload/c/preload_report_edges.c): exit() from a thread with a
    16 KiB stack (the report overflowed it: SIGSEGV), a fork while the
    report is written (its bytes went into the file twice: not JSON), and a
    main thread that called pthread_exit (footprint 0, no VMA, no
    executable; an exec'd child's report written over the parent's), a first
    malloc in a vfork child (the parent wrote path.<pid>, not path); a chdir
    before the first malloc (the relative path followed it), a program that
    never allocates (no report), exit() from a signal handler that
    interrupted an allocation (a hang: the heap lock at exit), a reader
    during the write (the file was truncated and written in place: two
    processes sharing the path spliced their reports)."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(EDGES, "test_preload_report_edges")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "r.json")
        for mode, want in (("min_stack", 3), ("fork_in_report", 0), ("pthread_exit", 0),
                           ("vfork_first", 0)):
            for f in os.listdir(d):
                os.unlink(os.path.join(d, f))
            status, out, err = run([EDGES, mode], "heaplab", {"HEAPLAB_STATS": path}, timeout=60)
            assert status == want, f"{mode}: exit status {status}, expected {want}: {err}"
            with open(path) as f:
                text = f.read()
            try:
                r = json.loads(text)
            except ValueError:
                heads = text.count('{"launcher"')
                raise AssertionError(f"{mode}: the report is not JSON ({len(text)} bytes, "
                                     f"{heads} report heads)") from None
            assert r["pid"] != 0 and r["interpreter"].endswith("test_preload_report_edges"), r
            assert r["footprint"]["rss"] > 0 and r["vma_count"] >= 1, (mode, r)
            assert r["stats"]["manual_mallocs"] > 0, (mode, r["stats"])
            if mode == "pthread_exit":
                child = int(out.split()[-1])
                assert r["pid"] != child, f"the exec'd child {child} wrote over the parent's report"
                assert os.path.exists(f"{path}.{child}"), (os.listdir(d), child)
        # (the preload hunt, session 25) a chdir before the first malloc: the
        # relative path is still the start directory's; a program that never
        # allocates reports too
        os.mkdir(os.path.join(d, "sub"))
        for mode in ("chdir_first", "no_malloc"):
            for f in os.listdir(d):
                if f != "sub":
                    os.unlink(os.path.join(d, f))
            status, out, err = run([EDGES, mode], "heaplab", {"HEAPLAB_STATS": "r.json"},
                                   timeout=60, cwd=d)
            assert status == 0, f"{mode}: exit status {status}: {err}"
            assert not os.listdir(os.path.join(d, "sub")), (mode, os.listdir(os.path.join(d, "sub")))
            r = report(path)
            assert r["pid"] != 0 and r["interpreter"].endswith("test_preload_report_edges"), r
        # the report counts large blocks' frees as their mallocs (the
        # mutation hunt, session 25: manual_frees left them out)
        os.unlink(path)
        status, out, err = run([EDGES, "large_frees"], "heaplab", {"HEAPLAB_STATS": path},
                               timeout=60)
        st = report(path)["stats"]
        assert status == 0 and st["manual_frees"] >= 100 and \
            st["manual_mallocs"] - st["manual_frees"] < 20, (status, err, st["manual_mallocs"],
                                                              st["manual_frees"])
        # elapsed_s counts from the process's start, not from the heap's
        # set-up (the first malloc; here at exit: it said 0.0001 s)
        os.unlink(path)
        status, out, err = run([EDGES, "sleep_first"], "heaplab", {"HEAPLAB_STATS": path},
                               timeout=60)
        assert status == 0, f"sleep_first: exit status {status}: {err}"
        elapsed = report(path)["elapsed_s"]
        assert 0.3 <= elapsed < 30, f"sleep_first: elapsed_s {elapsed} for a 0.3 s sleep"
        # the report replaces the file at its path whole, never written in
        # place: at every write of the exit's report the path still holds
        # the old one (it was truncated and written in place, and two
        # processes sharing a path left a splice of both: the harness hunt,
        # session 29); then it holds the new one, and no temporary file is
        # left
        for f in os.listdir(d):
            if f != "sub":
                os.unlink(os.path.join(d, f))
        with open(path, "w") as f:
            f.write('{"old": true}\n')
        status, out, err = run([EDGES, "whole_or_old"], "heaplab", {"HEAPLAB_STATS": path},
                               timeout=60)
        assert status == 0, f"whole_or_old: exit status {status}: {err}"
        assert report(path)["interpreter"].endswith("test_preload_report_edges")
        assert sorted(os.listdir(d)) == ["r.json", "sub"], sorted(os.listdir(d))
        # the file replaced keeps its mode, and a file with another name (a
        # hard link) is rewritten in place, every name holding the new report
        # (the review, session 29: a 0600 report became 0644, world-readable,
        # and the link kept the old one)
        os.chmod(path, 0o600)
        with open(path, "w") as f:
            f.write('{"old": true}\n')
        status, out, err = run([EDGES, "no_malloc"], "heaplab", {"HEAPLAB_STATS": path},
                               timeout=60)
        assert status == 0, f"no_malloc: exit status {status}: {err}"
        assert "interpreter" in report(path), report(path)
        assert os.stat(path).st_mode & 0o777 == 0o600, oct(os.stat(path).st_mode)
        link = os.path.join(d, "link.json")
        os.link(path, link)
        with open(path, "w") as f:
            f.write('{"old": true}\n')
        status, out, err = run([EDGES, "no_malloc"], "heaplab", {"HEAPLAB_STATS": path},
                               timeout=60)
        assert status == 0, f"no_malloc: exit status {status}: {err}"
        assert "interpreter" in report(link) and os.path.samefile(path, link), report(link)
        os.unlink(link)
        # exit() from a signal handler that interrupted an allocation: the
        # library's exit took the heap lock the interrupted call held (3-6 of
        # 20 runs hung); with no report asked it takes nothing, with one it
        # writes it or says the heap was busy
        # (not in make coverage's build: gcov's own dump at exit mallocs, and
        # waits for ever for the heap lock the interrupted call holds --
        # gdb: gcov_do_dump -> malloc -> hl__lock, 2 runs of 5)
        gcov = gcov_instrumented()
        for env in () if gcov else ({}, {"HEAPLAB_STATS": path}):
            for i in range(24):
                status, out, err = run([EDGES, "signal_exit", str(2000 + 1500 * i)], "heaplab",
                                       env, timeout=20)
                assert status == 0, f"signal_exit {env}: exit status {status}: {err}"
                if env:
                    assert os.path.exists(path) or "the heap is busy at exit" in err, err
                    if os.path.exists(path):
                        os.unlink(path)
    print("report: exit on a 16 KiB stack, a fork while it is written, after the main "
          "thread's pthread_exit, a first malloc in a vfork child, a chdir before it, no "
          "malloc at all" + (" (exit() from a signal handler not run: the library is "
                             "gcov-instrumented)" if gcov else ", exit() from a signal handler"))


def child_report_paths():
    """A program exec'd by a preloaded parent writes path.<pid> only when the
    parent's environment names the same HEAPLAB_STATS (the parent writes
    path); a parent without the variable, or with a path of its own, writes
    nothing at path, and the child writes path itself.  It wrote path.<pid>
    whenever the parent merely mapped the library: a preloaded Python
    harness's command arm got report None (the harness hunt, session 29)."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(EDGES, "test_preload_report_edges")
    spawn = ("import os, subprocess, sys; env = dict(os.environ); env.pop('HEAPLAB_STATS', None); "
             "env.update(HEAPLAB_STATS=sys.argv[2]) if sys.argv[2] else None; "
             "p = subprocess.run([sys.argv[1], 'child'], env=env); print(p.returncode)")
    with tempfile.TemporaryDirectory() as d:
        child = os.path.join(d, "child.json")
        parent = os.path.join(d, "parent.json")
        for parent_path, want in ((None, [("child.json", "child")]),
                                  (parent, [("child.json", "child"), ("parent.json", "parent")]),
                                  (child, [("child.json", "parent"), ("child.json.*", "child")])):
            for f in os.listdir(d):
                os.unlink(os.path.join(d, f))
            extra = {"PYTHONMALLOC": "malloc"}
            if parent_path:
                extra["HEAPLAB_STATS"] = parent_path
            status, out, err = run([STOCK_PYTHON, "-c", spawn, EDGES, child], "heaplab", extra)
            assert status == 0 and out.strip() == "0", (parent_path, status, out, err)
            got = sorted(os.listdir(d))
            assert len(got) == len(want), f"parent HEAPLAB_STATS={parent_path}: {got}, expected {want}"
            for name, who in want:
                found = glob.glob(os.path.join(d, name))
                assert len(found) == 1, (f"parent HEAPLAB_STATS={parent_path}: {got}, expected "
                                         f"{name} written by the {who}")
                path = found[0]
                r = report(path)
                ran = "test_preload_report_edges" if who == "child" else "python3"
                assert os.path.basename(r["interpreter"]).startswith(ran), (parent_path, path, r)
    # A stream -- a character device or a FIFO, or a symbolic link to one
    # (/dev/stderr, /dev/null) -- is written in place by every process: the
    # children wrote path.<pid> beside it, a regular file (/dev/null.<pid>
    # for every command of a script, as root; the real-programs hunt,
    # session 38).  Links in the test's folder: the old code's files land there.
    shell = "/usr/bin/python3 -c pass; dash -c :; (exit 0); echo done"
    with tempfile.TemporaryDirectory() as d:
        null, err_link = os.path.join(d, "null"), os.path.join(d, "err")
        os.symlink("/dev/null", null)
        os.symlink("/proc/self/fd/2", err_link)   # what /dev/stderr is
        status, out, err = run(["sh", "-c", shell], "heaplab", {"HEAPLAB_STATS": null})
        assert status == 0 and out == "done\n" and not err, (status, out, err)
        assert sorted(os.listdir(d)) == ["err", "null"], os.listdir(d)
        status, out, err = run(["sh", "-c", shell], "heaplab", {"HEAPLAB_STATS": err_link})
        assert status == 0 and out == "done\n", (status, out, err)
        assert sorted(os.listdir(d)) == ["err", "null"], os.listdir(d)
        decoder, at, reports = json.JSONDecoder(), 0, []
        while err[at:].strip():
            at += len(err[at:]) - len(err[at:].lstrip())
            r, at = decoder.raw_decode(err, at)
            reports.append(os.path.basename(r["interpreter"]))
        # sh, python3, dash -c, the subshell (a fork child of sh)
        assert len(reports) == 4 and reports.count("dash") == 3, reports
    print("an exec'd child writes path.<pid> only under a parent that writes the same path; "
          "on a stream (/dev/stderr, /dev/null) every process writes in place")


def report_in_a_comma_locale():
    """The report is JSON whatever locale the program selects: sort(1) calls
    setlocale(LC_ALL, "") and, under de_DE, "elapsed_s" was written 0,002136
    (the environment hunt, session 27).  The locale is made with localedef
    into a folder of the test's own (LOCPATH): nothing of the system's."""
    need(PRELOAD, "libheaplab-malloc.so")
    sort = shutil.which("sort")
    need(sort, "sort(1)")
    if not shutil.which("localedef") or not os.path.exists("/usr/share/i18n/locales/de_DE"):
        print("SKIP: no localedef or no de_DE locale source to make a decimal-comma locale")
        sys.exit(77)
    with tempfile.TemporaryDirectory() as d:
        loc = os.path.join(d, "loc")
        os.mkdir(loc)
        p = subprocess.run(["localedef", "-i", "de_DE", "-f", "UTF-8",
                            os.path.join(loc, "de_DE.UTF-8")], capture_output=True, text=True)
        assert os.path.isdir(os.path.join(loc, "de_DE.UTF-8")), p.stderr
        env = {"LOCPATH": loc, "LC_ALL": "de_DE.UTF-8", "HEAPLAB_STATS": os.path.join(d, "r.json")}
        check = run([STOCK_PYTHON, "-c", "import locale; locale.setlocale(locale.LC_ALL, ''); "
                     "print(locale.localeconv()['decimal_point'])"], "glibc", env)
        assert check[1].strip() == ",", f"the locale made has no decimal comma: {check}"
        status, out, err = run([sort, "/etc/passwd"], "heaplab", env)
        assert status == 0, (status, err)
        with open(env["HEAPLAB_STATS"]) as f:
            text = f.read()
        try:
            r = json.loads(text)
        except ValueError as e:
            raise AssertionError(f"the report under de_DE is not JSON ({e}): {text[:200]}")
        assert isinstance(r["elapsed_s"], float) and r["elapsed_s"] >= 0, r["elapsed_s"]
        assert r["allocator"] == "heaplab", r
    print("report under de_DE.UTF-8 (decimal comma): JSON")


def report_escapes_strings():
    """The report's strings are JSON strings whatever they hold: "interpreter"
    (the program's path) was written raw, so a program under a folder whose
    name has a quote, a backslash, a tab or a byte that is not UTF-8 wrote a
    report that was not JSON (the environment hunt, session 27).  A byte
    that is not UTF-8 is written as U+00XX of its value (clients/client.h):
    also the bytes of a UTF-16 surrogate (ED A0 80) and of a code point past
    U+10FFFF (F4 90 80 80), which a strict decoder refuses as it refuses
    0xFF (mutants client-json-passes-a-surrogate and
    client-json-passes-past-u10ffff, session 37)."""
    need(PRELOAD, "libheaplab-malloc.so")
    with tempfile.TemporaryDirectory() as d:
        odd = os.path.join(os.fsencode(d), b'we"ird\\dir\tx\xff\xc3(\x01\xc3\xa9'
                           b'\xed\xa0\x80\xf4\x90\x80\x80')
        os.mkdir(odd)
        prog = os.path.join(odd, b"prog")
        shutil.copy("/usr/bin/true", prog)
        path = os.path.join(d, "r.json")
        status, out, err = run([prog], "heaplab", {"HEAPLAB_STATS": path})
        assert status == 0, (status, err)
        with open(path, "rb") as f:
            text = f.read()
        try:
            r = json.loads(text)
        except ValueError as e:
            raise AssertionError(f"the report is not JSON ({e}): {text[:200]!r}")
        want = (os.fsencode(d).decode() + '/we"ird\\dir\tx\u00ff\u00c3(\u0001\u00e9'
                '\u00ed\u00a0\u0080\u00f4\u0090\u0080\u0080/prog')
        assert r["interpreter"] == want, (r["interpreter"], want)
    print("report: a program path with a quote, a backslash, a tab, bytes not UTF-8: JSON")


def report_without_proc():
    """Without /proc (a mount namespace that unmounted it, a chroot), what
    the report cannot read is null: it said a footprint of 0, vma_count 0
    and interpreter "" (the environment hunt, session 27).  Needs root for
    the mount namespace (unshare -m): skipped otherwise."""
    need(PRELOAD, "libheaplab-malloc.so")
    ns = without_proc()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "r.json")
        # (the library preloaded into the program only, not unshare and sh)
        status, out, err = run(ns + ['umount -l /proc && LD_PRELOAD="$1" exec "$0" -c '
                                     '"x = [str(i) for i in range(100000)]"',
                                     STOCK_PYTHON, PRELOAD],
                               "glibc", {"HEAPLAB_STATS": path, "PYTHONMALLOC": "malloc"})
        assert status == 0, (status, err)
        r = report(path)
        assert r["stats"]["manual_mallocs"] > 100000, r["stats"]
        assert r["footprint"] == dict.fromkeys(("rss", "anonymous", "lazyfree", "swap",
                                                "phys_footprint", "anon_huge")), r["footprint"]
        assert r["vma_count"] is None and r["interpreter"] is None, r
        assert r["resident_bytes"] > 0, r     # (mincore without /proc)
    print("report without /proc: null footprint, vma_count and interpreter")


def exit_without_handlers():
    """A process that ends with _exit, _Exit or quick_exit writes its report
    as exit() does: dash ends every shell with _exit (no exit handler, no
    destructor ran: no report at all), Python's os._exit in a fork child.  A
    vfork child whose exec failed (dash runs a missing command that way)
    writes nothing: its memory is its parent's."""
    need(PRELOAD, "libheaplab-malloc.so")
    dash = shutil.which("dash") or "/bin/dash"
    need(dash, "dash")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "d.json")
        status, out, err = run([dash, "-c", "echo hi; no_such_command_zz 2>/dev/null; echo $?"],
                               "heaplab", {"HEAPLAB_STATS": path})
        assert status == 0 and out == "hi\n127\n" and not err, (status, out, err)
        assert os.listdir(d) == ["d.json"], os.listdir(d)
        r = report(path)
        assert r["interpreter"].endswith("dash") and r["stats"]["manual_mallocs"] > 0, r
        code = ("import os, ctypes, sys\n"
                "pid = os.fork()\n"
                "if pid == 0: os._exit(0)\n"
                "os.waitpid(pid, 0)\n"
                "x = [str(i) for i in range(10000)]\n"
                "f = getattr(ctypes.CDLL(None), sys.argv[1])\n"
                "f(4)\n")
        for how in ("_exit", "_Exit", "quick_exit"):
            path = os.path.join(d, how + ".json")
            status, out, err = run([STOCK_PYTHON, "-c", code, how], "heaplab",
                                   {"HEAPLAB_STATS": path, "PYTHONMALLOC": "malloc"})
            assert status == 4 and not err, (how, status, err)
            files = sorted(f for f in os.listdir(d) if f.startswith(how + ".json"))
            assert len(files) == 2 and files[0] == how + ".json", (how, files)
            assert report(path)["stats"]["manual_mallocs"] > 10000, how
            report(os.path.join(d, files[1]))  # the fork child's os._exit
    print("_exit (dash, os._exit), _Exit, quick_exit: reports written; a vfork child's none")


def signal_to_itself():
    """A program that ends by a default-fatal signal it sends itself writes
    its report: python3 after an uncaught KeyboardInterrupt (CPython sets
    SIGINT to SIG_DFL and kill()s itself: status 130 in a shell), os.kill of
    itself with SIGTERM, signal.raise_signal, bash's `kill -TERM $$` and of
    its process group (`kill 0`, `kill -- -$$`: killpg; os.kill of minus its
    group's id).  They
    ran no exit handler and wrote none (python3 stopped by Ctrl-C: the
    preload hunt, session 34).  A signal that does not end the process --
    caught, or blocked -- writes nothing then: the report comes at exit and
    counts what came after (100,000 strings)."""
    need(PRELOAD, "libheaplab-malloc.so")
    after = "x = [str(i) for i in range(100000)]"
    cases = [
        ("KeyboardInterrupt", [STOCK_PYTHON, "-c", "raise KeyboardInterrupt"], -signal.SIGINT),
        ("os.kill SIGTERM", [STOCK_PYTHON, "-c",
                             "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"],
         -signal.SIGTERM),
        ("raise_signal", [STOCK_PYTHON, "-c", "import signal; signal.raise_signal(signal.SIGINT)"],
         -signal.SIGINT),
        ("bash kill", ["bash", "-c", "kill -TERM $$"], -signal.SIGTERM),
        # (its process group, by 0 and by minus its id -- `kill -- -$$`, a
        # script ending itself and its children: the group's id was not
        # recognised, no report; setsid: a group of its own, not pytest's)
        ("bash kill 0", ["setsid", "bash", "-c", "kill -TERM 0"], -signal.SIGTERM),
        ("bash kill -$$", ["setsid", "bash", "-c", "kill -TERM -- -$$"], -signal.SIGTERM),
        ("os.kill -pgrp", ["setsid", STOCK_PYTHON, "-c",
                           "import os, signal; os.kill(-os.getpgrp(), signal.SIGTERM)"],
         -signal.SIGTERM),
        ("caught", [STOCK_PYTHON, "-c", "import os, signal; signal.signal(signal.SIGTERM, "
                    "lambda *a: None); os.kill(os.getpid(), signal.SIGTERM); " + after], 0),
        ("blocked", [STOCK_PYTHON, "-c", "import os, signal; signal.pthread_sigmask("
                     "signal.SIG_BLOCK, [signal.SIGTERM]); os.kill(os.getpid(), signal.SIGTERM); "
                     + after], 0),
    ]
    with tempfile.TemporaryDirectory() as d:
        for name, argv, want in cases:
            path = os.path.join(d, name.replace(" ", "_") + ".json")
            status, out, err = run(argv, "heaplab", {"HEAPLAB_STATS": path,
                                                     "PYTHONMALLOC": "malloc"}, timeout=60)
            assert status == want, (name, status, err)
            assert os.path.exists(path), (name, "no report", err)
            mallocs = report(path)["stats"]["manual_mallocs"]
            if want == 0:
                assert mallocs > 100000, (name, mallocs, "written before the strings")
    print("a fatal signal sent to itself (KeyboardInterrupt, os.kill, raise_signal, bash kill "
          "of itself and of its group): "
          "a report each; caught or blocked: the report at exit")

def own_malloc():
    """The process's malloc is another object's -- the program defines its
    own (tests/preload/c/preload_own_malloc.c), or an allocator is preloaded
    before the library, or valgrind's memcheck or massif redirects the
    library's functions to its own: no call comes to the library, which
    wrote a blank report (0 mallocs) at exit as if the program allocated
    nothing.  It now
    writes none and says why on one line; a program that merely takes
    malloc's address (python3, test_preload_malloc_address: dlsym answers its
    PLT stub) still reports."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(OWN_MALLOC, "test_preload_own_malloc")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "o.json")
        status, out, err = run([OWN_MALLOC], "heaplab", {"HEAPLAB_STATS": path,
                                                         "HEAPLAB_TRACE_EVENTS": path + ".ev"})
        assert status == 0 and out == "bump 112000\n", (status, out, err)
        assert os.listdir(d) == [], os.listdir(d)
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("libheaplab-malloc: malloc is defined by ") \
            and OWN_MALLOC in lines[0] and "no report written" in lines[0], err
        # without HEAPLAB_STATS: nothing asked, nothing said
        status, out, err = run([OWN_MALLOC], "heaplab")
        assert status == 0 and not err, (status, err)
        # jemalloc and mimalloc first (mimalloc's malloc is also its
        # __libc_malloc, the name dladdr gives: it was not recognised, and a
        # blank report was written -- the preload hunt, session 34)
        for name in ("libjemalloc.so.2", "libmimalloc.so.2"):
            other = next((p for p in (f"/usr/lib/x86_64-linux-gnu/{name}",
                                      f"/usr/lib/aarch64-linux-gnu/{name}")
                          if os.path.exists(p)), None)
            if not other:
                continue
            path = os.path.join(d, "j.json")
            status, out, err = run(["bash", "-c", "echo hi"], "heaplab",
                                   {"LD_PRELOAD": f"{other} {PRELOAD}", "HEAPLAB_STATS": path})
            assert status == 0 and out == "hi\n" and not os.path.exists(path), (name, status, err)
            assert "malloc is defined by " + other in err, (name, err)
        # glibc's libc_malloc_debug.so first (MALLOC_CHECK_, mtrace): its
        # malloc is malloc@GLIBC_2.2.5 only, which dlsym without a version
        # skips -- the library took the process's malloc for its own and
        # wrote a blank report, saying nothing (the same hunt)
        debug = next((p for p in ("/lib/x86_64-linux-gnu/libc_malloc_debug.so.0",
                                  "/lib/aarch64-linux-gnu/libc_malloc_debug.so.0")
                      if os.path.exists(p)), None)
        if debug:
            path = os.path.join(d, "m.json")
            status, out, err = run(["bash", "-c", "echo hi"], "heaplab",
                                   {"LD_PRELOAD": f"{debug} {PRELOAD}", "HEAPLAB_STATS": path,
                                    "MALLOC_CHECK_": "3"})
            assert status == 0 and out == "hi\n" and not os.path.exists(path), (status, err)
            assert "malloc is defined by " + debug in err, err
        # valgrind's tools that replace malloc (memcheck, massif, ...)
        # redirect the library's functions at their address, which dlsym
        # does not see: it took the process's malloc for its own and wrote a
        # blank report, 0 mallocs (the real-programs hunt, session 38);
        # --tool=none leaves them here, and the report is written
        valgrind = shutil.which("valgrind") or "/usr/bin/valgrind"
        need(valgrind, "valgrind")
        for tool, opts in (("memcheck", []), ("massif", ["--massif-out-file=/dev/null"]),
                           ("none", [])):
            path = os.path.join(d, f"v-{tool}.json")
            status, out, err = run([valgrind, "-q", f"--tool={tool}", *opts, "bash", "-c",
                                    "echo hi"], "heaplab",
                                   {"HEAPLAB_STATS": path, "HEAPLAB_TRACE_EVENTS": path + ".ev"},
                                   timeout=120)
            assert status == 0 and out == "hi\n", (tool, status, out, err)
            if tool == "none":
                assert not err and report(path)["stats"]["manual_mallocs"] > 100, (tool, err)
                continue
            assert not os.path.exists(path) and not os.path.exists(path + ".ev"), \
                (tool, err, report(path)["stats"]["manual_mallocs"])
            lines = err.splitlines()
            assert len(lines) == 1 and "calls of malloc do not reach this library" in lines[0] \
                and "valgrind" in lines[0] and "no report written" in lines[0], (tool, err)
        # a program without PIE that takes malloc's address (a canonical PLT
        # entry, which dlsym answers) and never allocates: no malloc of its
        # own, so its report is written and nothing said (it said "malloc is
        # defined by" the program and wrote none -- the same hunt)
        need(MALLOC_ADDRESS, "test_preload_malloc_address")
        path = os.path.join(d, "a.json")
        status, out, err = run([MALLOC_ADDRESS], "heaplab", {"HEAPLAB_STATS": path})
        assert status == 0 and out == "taken\n" and not err, (status, out, err)
        assert report(path)["allocator"] == "heaplab", report(path)
        os.unlink(path)
        path = os.path.join(d, "p.json")
        status, out, err = run([STOCK_PYTHON, "-c", "print(1)"], "heaplab",
                               {"HEAPLAB_STATS": path})
        assert status == 0 and not err and report(path)["stats"]["manual_mallocs"] > 0, err
    print("a program's own malloc, jemalloc, mimalloc or libc_malloc_debug first, valgrind's "
          "memcheck or massif: no report, one line; valgrind --tool=none, python3 "
          "and a program taking malloc's address report")


def exit_in_signal_handler():
    """A SIGALRM handler calls _exit(3) -- async-signal-safe -- while the
    program's thread is in a malloc/free loop (tests/preload/c/
    preload_exit_in_handler.c).  The library's _exit ran HEAPLAB_VERIFY's
    check (the heap lock) and a dlsym (a missing symbol's error string is
    malloc'ed) before its busy check: the process hung for ever when the
    signal had interrupted an allocation holding the lock (6 of 6 runs under
    verify with no report asked; 1 of 300 with HEAPLAB_STATS -- the review of
    f384a21; 8 of 40 with one-block thread caches, which take the lock
    often).  A handler that interrupted glibc's own malloc passed that check
    and the report waited for glibc's arena lock (large blocks with an event
    trace, and HEAPLAB_ALLOCATOR=libc, each with a second thread; and the
    program's own malloc_info and mallopt, which the library did not count:
    HEAPLAB_ALLOCATOR=libc's cases are exit_in_glibc_malloc's now).  A
    handler in a thread making its first cache, between the caches' registry
    lock and the heap's, passed both: the report made a second cache and
    waited for the registry lock for ever (new_threads).  Each run ends with
    status 3 within a few seconds: with nothing asked, nothing
    said; with a report asked, the report or the one line that the heap was
    busy.  And first, exit() while another thread holds the heap's lock for
    100 ms (lock_held): the report waits for it and is written."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(EXIT_IN_HANDLER, "test_preload_exit_in_handler")
    busy = "libheaplab-malloc: the heap is busy at exit"
    counts = {}
    with tempfile.TemporaryDirectory() as d:
        # exit() while another thread holds the heap's lock for 100 ms (its
        # free held at a page made unreadable, preload_exit_in_handler.c
        # lock_held): the report waits for the lock, up to half a second,
        # and is written -- a busy check that gave up at once said "busy"
        # and wrote none (the mutation audit, session 40)
        path = os.path.join(d, "lock_held.json")
        status, out, err = run([EXIT_IN_HANDLER, "0", "lock_held"], "heaplab",
                               {"HEAPLAB_STATS": path, "HEAPLAB_VERIFY": "1",
                                "HEAPLAB_TCACHE_BLOCKS": "0"}, timeout=10)
        assert status == 3 and err == "", ("lock_held", status, err)
        assert os.path.exists(path), "lock_held: no report"
        cases = [("verify", {"HEAPLAB_VERIFY": "1"}, "loop", 40),
                 ("verify+stats", {"HEAPLAB_VERIFY": "1"}, "loop", 40),
                 # (the alarm 1-3000 us in: it may land in the heap's set-up,
                 # the first malloc -- which ended without a report or a line,
                 # 9 of 200 runs on a loaded machine)
                 ("verify+stats+early", {"HEAPLAB_VERIFY": "1"}, "early", 60),
                 # (caches of one block: the heap lock taken often -- the
                 # dlsym hang, 8 of 40 runs before the fix)
                 ("stats+one-block-caches", {"HEAPLAB_TCACHE_BLOCKS": "1"}, "loop", 40),
                 ("stats", {}, "small", 100),
                 # (a handler that interrupted glibc's own malloc -- large
                 # blocks, past small_max; every call on the system allocator
                 # -- in a threaded program: glibc's arena lock held, and the
                 # report's allocations that reach glibc -- an event trace past
                 # 16 KiB, every one under HEAPLAB_ALLOCATOR=libc -- waited for
                 # it for ever: 9 and 26 of 30 runs hung, the h34exit helper)
                 # (HEAPLAB_ALLOCATOR=libc's cases, where the report is
                 # written every time now: exit_in_glibc_malloc)
                 ("stats+events+large", {}, "large", 30),
                 # (threads made one after another, each making its cache
                 # with every mutex lock 300 us slower: a handler between
                 # the caches' registry lock and the heap's -- the report made
                 # a second cache and waited for that lock for ever, 1 of
                 # 2,000 runs of "small" on a loaded machine, session 35)
                 ("stats+new-threads", {}, "new_threads", 30)]
        def one(name, extra, mode, i):
            env = dict(extra)
            path = os.path.join(d, f"{name}.{i}.json")
            if "stats" in name:
                env["HEAPLAB_STATS"] = path
            if "events" in name:
                env["HEAPLAB_TRACE_EVENTS"] = path + ".events"
            delay = str(1000 + (i * 977) % 20000 if mode in ("loop", "large", "new_threads")
                        else 1 + (i * 149) % 3000 if mode == "early" else 1000 + (i * 37) % 5000)
            try:
                status, out, err = run([EXIT_IN_HANDLER, delay,
                                        "loop" if mode == "early" else mode], "heaplab", env,
                                       timeout=10)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name}: run {i} ({delay} us, {mode}) hung: "
                                     "no exit within 10 s") from None
            assert status == 3, (name, i, status, err)
            if "stats" not in name:
                assert err == "", (name, i, err)   # nothing asked, nothing said
                return None
            if os.path.exists(path):
                report(path)
                assert err == "", (name, i, err)
                return "report"
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith(busy), (name, i, err)
            return "busy"

        # three runs at a time (370 runs, one after the other, took 71 s of
        # make test; the alarm's moment is what varies, not the load)
        calls = [(name, runs, extra, mode, i) for name, extra, mode, runs in cases
                 for i in range(runs)]
        got = three_at_a_time([(one, (name, extra, mode, i))
                               for name, runs, extra, mode, i in calls])
        for (name, runs, *_), r in zip(calls, got):
            n, w, b = counts.get(name, (runs, 0, 0))
            counts[name] = (n, w + (r == "report"), b + (r == "busy"))
    print("_exit from a SIGALRM handler in a malloc loop: every run exit 3 in time "
          + "; ".join(f"{k}: {r} runs, {w} reports, {b} busy" for k, (r, w, b) in counts.items()))


def gcov_instrumented():
    """Is the library built for make coverage (-Db_coverage=true)?  There an
    exit() from a signal handler that interrupted an allocation hangs in
    gcov's own dump at exit, which mallocs -- the instrumentation's wait,
    not the library's (gdb: gcov_do_dump -> malloc -> hl__lock; and, inside
    glibc's malloc, the arena lock: exit_in_glibc_malloc's exit() runs hung
    in make coverage's run of session 41)."""
    with open(PRELOAD, "rb") as f:
        return b"__gcov_dump" in f.read()


def exit_in_glibc_malloc():
    """A SIGALRM handler ends the process (_exit(3), or exit(3): "+exit")
    while its thread is inside glibc's allocator (tests/preload/c/
    preload_exit_in_handler.c).  The library counted how deep each thread
    was in glibc's allocator and wrote no report there ("the heap is busy at
    exit"): the report's allocations had waited for the arena lock its own
    thread held.  Since session 40 the report allocates nothing, so it is
    written: under HEAPLAB_ALLOCATOR=libc -- a malloc loop on one thread and
    beside a second, large blocks, a fork loop, the program's own mallopt
    and malloc_info (h39exit) -- every run writes the whole report, nothing
    on stderr (before: "busy" in 7-20 of 20 runs of each; with the count's
    check taken out, no run of these hung, h41libc, session 41).  On the heap,
    exit() inside a large block's glibc malloc, the thread's cache holding
    256 pages' worth of blocks (cached_large, HEAPLAB_TCACHE_BYTES=0,
    HEAPLAB_WARM_PAGES=0) and glibc's own thread cache off
    (GLIBC_TUNABLES=glibc.malloc.tcache_count=0): exit()'s flush of that
    cache runs a trim, whose lists are glibc's -- 19 of 30 runs hung with the
    flush made there; the flush is skipped inside glibc and the report
    written (the heap's lock held by the interrupted allocation: busy, 2-4
    runs of 30; before, busy in 28 of 30).  And a program that never
    allocated, exit() inside its mallopt or in fork()'s window (setup_mallopt,
    setup_fork): its heap is set up at exit from glibc, refused inside glibc
    ("busy"; made there, it hung), else made and the report written."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(EXIT_IN_HANDLER, "test_preload_exit_in_handler")
    busy = "libheaplab-malloc: the heap is busy at exit"
    libc = {"HEAPLAB_ALLOCATOR": "libc"}
    cached = {"HEAPLAB_TCACHE_BYTES": "0", "HEAPLAB_WARM_PAGES": "0",
              "GLIBC_TUNABLES": "glibc.malloc.tcache_count=0"}
    # (no fork with exit(): glibc's own exit() hangs there in 9 of 30 runs
    # without the library -- exit() is not async-signal-safe)
    cases = [("libc", libc, "loop", 20), ("libc+exit", libc, "loop", 20),
             ("libc+threaded", libc, "threaded", 20), ("libc+threaded+exit", libc, "threaded", 20),
             ("libc+large", libc, "large", 20), ("libc+fork", libc, "fork", 20),
             ("libc+mallopt", libc, "mallopt", 20), ("libc+malloc_info", libc, "malloc_info", 20),
             ("cached-large+exit", cached, "cached_large", 30),
             # (no malloc before: the heap is set up at exit, from glibc --
             # inside glibc's mallopt, or in fork()'s window that the
             # library counts as inside glibc, it is refused, "busy": made
             # there, it waited for the arena lock its own thread held, 6 of
             # 6 mallopt runs and 1 of 6 fork runs hung, h42left, session 42)
             ("setup+mallopt+exit", {}, "setup_mallopt", 20),
             ("setup+fork+exit", {}, "setup_fork", 20)]
    # (exit() from the handler not run in make coverage's build: gcov_instrumented)
    gcov = gcov_instrumented()
    if gcov:
        cases = [c for c in cases if not c[0].endswith("+exit")]
    keys = None
    with tempfile.TemporaryDirectory() as d:
        # the keys of a whole report on the system allocator
        path = os.path.join(d, "whole.json")
        status, out, err = run(["true"], "heaplab", dict(libc, HEAPLAB_STATS=path), timeout=30)
        assert status == 0 and not err, (status, err)
        with open(path) as f:
            whole = json.load(f)
        keys = sorted(whole)

        def one(name, extra, mode, i):
            path = os.path.join(d, f"{name}.{i}.json")
            delay = str(60000 + (i * 977) % 20000 if mode == "fork" else 1000 + (i * 977) % 20000)
            # (the heap set up before the alarm: one in the set-up says "being
            # set up", no report -- the third argument)
            argv = [EXIT_IN_HANDLER, delay, mode, "exit" if name.endswith("+exit") else "_exit"]
            try:
                status, out, err = run(argv, "heaplab", dict(extra, HEAPLAB_STATS=path),
                                       timeout=10)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"{name}: run {i} ({delay} us) hung: "
                                     "no exit within 10 s") from None
            assert status == 3, (name, i, status, err)
            if name.startswith("libc"):
                # every time: the whole report, nothing said
                assert err == "" and os.path.exists(path), (name, i, err)
                with open(path) as f:
                    got = json.load(f)
                assert sorted(got) == keys and got["allocator"] == "libc", (name, i, got)
                assert got["footprint"]["rss"] and got["stats"] is None, (name, i, got)
                return "report"
            if os.path.exists(path):
                # (the set-up's: the heap made at exit, after the program's
                # last call -- no malloc of the program's)
                assert name.startswith("setup") or report(path)["stats"]["manual_mallocs"] > 1024, \
                    (name, i)
                assert report(path)["stats"] is not None and err == "", (name, i, err)
                return "report"
            lines = err.splitlines()
            assert len(lines) == 1 and lines[0].startswith(busy), (name, i, err)
            return "busy"

        calls = [(name, extra, mode, i) for name, extra, mode, runs in cases for i in range(runs)]
        got = three_at_a_time([(one, c) for c in calls])
    counts = {}
    for (name, *_), r in zip(calls, got):
        counts.setdefault(name, []).append(r)
    # (on the heap the interrupted allocation may hold the heap's lock: busy
    # then -- 2-4 of 30; it said busy in 28 of 30 before)
    heap = counts.get("cached-large+exit")
    assert gcov or heap.count("report") > heap.count("busy"), heap
    print("exit inside glibc's allocator: every run exit 3 in time; "
          + "; ".join(f"{k}: {len(v)} runs, {v.count('report')} reports, {v.count('busy')} busy"
                      for k, v in counts.items())
          + (" (exit() from the handler not run: the library is gcov-instrumented)"
             if gcov else ""))


def malloc_in_signal_handler():
    """A signal handler that allocates on a thread that holds the heap's lock
    (tests/preload/c/preload_malloc_in_signal_handler.c: under
    HEAPLAB_VERIFY=1 and no thread caches a free poisons its block under the
    lock, on a page the program made unreadable; the SIGSEGV handler
    mallocs): the handler's malloc would wait for its own thread.  It hung
    for ever in silence (the program's 20 s alarm; h43lock, session 43) --
    as would any C library call made under the lock that allocates (glibc's
    qsort did, session 42).  The library says so in one line and aborts at
    once.  So does a
    handler's fork(), whose fork handler retried its wait for the lock for
    ever ("fork"), and a handler's pthread_exit, whose thread's exit flushed
    its caches and tried the lock for ever (thread_exit: tc_destructor).
    And the same three on a thread that holds the thread caches' lock
    (tc_global, making its first cache: first_cache), each of which took
    that lock again and waited for itself for ever (session 45)."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(MALLOC_IN_HANDLER, "test_preload_malloc_in_signal_handler")
    for what, call in (("malloc", "a call of the malloc family"), ("fork", "fork()")):
        for run_no in range(3):
            status, out, err = run([MALLOC_IN_HANDLER, what], "heaplab",
                                   {"HEAPLAB_VERIFY": "1", "HEAPLAB_TCACHE_BLOCKS": "0"},
                                   timeout=60)
            lines = err.splitlines()
            assert status == -signal.SIGABRT, (what, run_no, status, out, err)
            assert len(lines) == 1 and lines[0].startswith(
                f"libheaplab-malloc: {call} on a thread that holds the heap's lock"), \
                (what, run_no, err)
            assert out == "", (what, run_no, out)
        print(f"{what} in a signal handler inside the heap's lock: {lines[0]}")
    # and a handler that ends its thread there (pthread_exit): the thread's exit
    # flushes its caches, whose try of the heap's lock failed for ever, the lock
    # its own -- it slept and tried again, the join waiting: the program's 20 s
    # alarm ("hung", exit 1; session 44)
    call = "the exit of a thread (its thread caches' flush)"
    for run_no in range(3):
        status, out, err = run([MALLOC_IN_HANDLER, "thread_exit"], "heaplab",
                               {"HEAPLAB_RESERVE_BYTES": "16m"}, timeout=60)
        if status == 77:
            print("thread_exit: skipped (glibc's pthread_mutex_lock by its version: x86-64 and "
                  "AArch64 only)")
            return
        lines = err.splitlines()
        assert status == -signal.SIGABRT, ("thread_exit", run_no, status, out, err)
        assert len(lines) == 1 and lines[0].startswith(
            f"libheaplab-malloc: {call} on a thread that holds the heap's lock"), \
            ("thread_exit", run_no, err)
        assert out == "", ("thread_exit", run_no, out)
    print(f"a thread ended by a signal handler inside the heap's lock: {lines[0]}")
    # a handler that interrupts a thread making its first cache, tc_global held
    # (this program's pthread_mutex_trylock of the heap's lock, tc_global's
    # taking before it): its malloc made a cache of its own and took tc_global
    # again, its fork()'s handler took it first, its pthread_exit's flush took
    # it -- each waited for its own thread for ever (the 20 s alarm, session 45)
    for does, call in (("malloc", "a call of the malloc family (making its thread's cache)"),
                       ("fork", "fork()"),
                       ("thread_exit", "the exit of a thread (its thread caches' flush)")):
        for run_no in range(3):
            status, out, err = run([MALLOC_IN_HANDLER, "first_cache", does], "heaplab", {},
                                   timeout=60)
            if status == 77:
                print("first_cache: skipped (x86-64 and AArch64 only)")
                return
            lines = err.splitlines()
            assert status == -signal.SIGABRT, ("first_cache", does, run_no, status, out, err)
            assert len(lines) == 1 and lines[0].startswith(
                f"libheaplab-malloc: {call} on a thread that holds the thread caches' lock"), \
                ("first_cache", does, run_no, err)
            assert out == "", ("first_cache", does, run_no, out)
        print(f"{does} in a signal handler inside the caches' lock: {lines[0]}")


def exit_in_handler_inside_errlock():
    """A SIGALRM handler calls _exit(3) while the program's thread, under
    HEAPLAB_VERIFY=1, frees each block with free_sized of a size the block
    does not hold (refused: the core copies the refusal's message to the
    heap under the heap's errlock, the heap's lock free), then with free --
    every mutex lock 300 us slower (preload_exit_in_handler.c refused_sized),
    without /proc.  The report's vma_count fails there, and its failure's
    message went to the heap under errlock again: a handler that had
    interrupted its thread inside errlock waited for it for ever (5 of 30
    runs, h39exit, session 39).  Each run exits 3 within 10 s, with the
    report (vma_count null) or the one line that the heap was busy.  Needs
    root for the mount namespace (unshare -m): skipped otherwise."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(EXIT_IN_HANDLER, "test_preload_exit_in_handler")
    ns = without_proc()
    busy = "libheaplab-malloc: the heap is busy at exit"
    runs = 40
    with tempfile.TemporaryDirectory() as d:
        def one(i):
            path = os.path.join(d, f"r{i}.json")
            delay = str(1000 + (i * 977) % 20000)
            # (the library preloaded into the program only, not unshare and sh)
            try:
                status, out, err = run(ns + ['umount -l /proc && LD_PRELOAD="$1" exec "$0" "$2" '
                                             'refused_sized', EXIT_IN_HANDLER, PRELOAD, delay],
                                       "glibc", {"HEAPLAB_VERIFY": "1", "HEAPLAB_STATS": path},
                                       timeout=10)
            except subprocess.TimeoutExpired:
                raise AssertionError(f"run {i} ({delay} us) hung: no exit within 10 s") from None
            assert status == 3, (i, status, err)
            lines = [x for x in err.splitlines() if not x.endswith(": refused")
                     and x != "libheaplab-malloc: further refused calls not shown"]
            if os.path.exists(path):
                r = report(path)
                assert r["vma_count"] is None and r["stats"]["manual_mallocs"] > 0, r
                assert not lines, (i, err)
                return "report"
            assert len(lines) == 1 and lines[0].startswith(busy), (i, err)
            return "busy"

        # (three at a time, as exit_in_signal_handler)
        got = three_at_a_time([(one, (i,)) for i in range(runs)])
    assert "report" in got, got   # (the report is written there, not only refused)
    print(f"_exit from a SIGALRM handler beside a refused free_sized, without /proc: every run "
          f"exit 3 in time; {runs} runs, {got.count('report')} reports, "
          f"{got.count('busy')} busy")


def launcher_that_never_allocated():
    """A launcher's process (its executable exports the launchers' mark:
    tests/preload/c/preload_launcher_mark.c) that never allocates and
    writes its own HEAPLAB_STATS report at exit: the report stays the
    launcher's.  The library sets a heap up at exit for a program that never
    allocated, which fills the report's path; the launcher check made before
    that set-up passed, and the library's report replaced the launcher's
    (the review of session 33, mended in 71e29fe from the code)."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(LAUNCHER_MARK, "test_preload_launcher_mark")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "l.json")
        for i in range(5):
            status, out, err = run([LAUNCHER_MARK], "heaplab", {"HEAPLAB_STATS": path},
                                   timeout=30)
            assert status == 0 and not err, (i, status, err)
            with open(path) as f:
                got = json.load(f)
            assert got == {"launcher": "test_preload_launcher_mark"}, \
                f"run {i}: the launcher's report was replaced by the library's: {got}"
            assert os.listdir(d) == ["l.json"], os.listdir(d)
            os.unlink(path)
    print("a launcher that never allocated: its own report stays, 5 runs")


def exit_beside_a_set_up():
    """_exit(0) from a thread while another sets the heap up, no report
    asked (tests/preload/c/preload_report_edges.c exit_during_setup: the
    set-up held in the program's getpid): the process ends at once, nothing
    said.  The library's wait for another thread's set-up (half a second)
    ran before "nothing asked, nothing done" (mended in 71e29fe from the
    code): the program, still alive 300 ms after the _exit, says so and
    exits 2."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(EDGES, "test_preload_report_edges")
    for i in range(10):
        status, out, err = run([EDGES, "exit_during_setup"], "heaplab", timeout=30)
        assert status == 0 and not err, (i, status, err)
    print("_exit beside another thread's set-up, nothing asked: 10 runs, none waited")


def fork_beside_a_set_up():
    """A child forked while another thread sets the heap up calls _exit(0),
    HEAPLAB_STATS asked (tests/preload/c/preload_report_edges.c
    fork_during_setup): it ends at once with one line saying it was forked
    during the set-up and writes no report (the set-up's paths were not
    made in it), and the parent -- whose set-up then ends -- writes its
    report.  The child kept the parent's "being set up" for good (its calls
    went to glibc): its _exit waited half a second and said the heap was
    busy at exit (mended in 71e29fe from the code: the fork handler makes it
    the system allocator's); then it ended without a word, its report lost
    unsaid (the h34exit helper, session 34)."""
    need(PRELOAD, "libheaplab-malloc.so")
    need(EDGES, "test_preload_report_edges")
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "f.json")
        for i in range(10):
            status, out, err = run([EDGES, "fork_during_setup"], "heaplab",
                                   {"HEAPLAB_STATS": path}, timeout=30)
            assert status == 0 and "busy" not in err, (i, status, err)
            lines = err.splitlines()
            assert len(lines) == 1 and re.fullmatch(
                r"libheaplab-malloc: process \d+ was forked \(or its parent was\) while another "
                r"thread set the heap up: no report written", lines[0]), (i, err)
            assert report(path)["stats"]["manual_mallocs"] > 0
            os.unlink(path)
    print("_exit of a child forked beside a set-up, a report asked: 10 runs, none waited")


def setup_leaves_libc_alone():
    """The library's set-up, in a program without HEAPLAB_ variables, calls
    nothing of libc's that the program may not call itself: each such call
    faults in a 64 KiB window of libc's text or data around it, part of the
    library's fixed cost in peak RSS (docs/performance.md, the preloaded
    library; issue 17's target).  Read from the dynamic loader's debug
    output (LD_DEBUG, to stderr), for a stock program that allocates:
    - no getenv: the core's HEAPLAB_COUNTERS_FILE look-up called it
      (prim/syscall.c; the library's own look-ups walk environ already);
    - no symbol looked up after the library's constructor started: the
      launchers' mark was dlsym(RTLD_DEFAULT, ...), which fails in every
      other program, and the dlerror() clearing the failure formatted its
      message -- asprintf and gettext's catalogue look-up.  It is a weak
      reference now, bound while the library is relocated.
    Both were there at ee5b4a1 (session 43): the one-block program's peak
    RSS 1,888 -> 1,708 KiB without them (median of 9)."""
    need(PRELOAD, "libheaplab-malloc.so")
    sort = shutil.which("sort") or "/usr/bin/sort"
    need(sort, "sort")
    lib = os.path.basename(PRELOAD)
    for what in ("bindings", "symbols"):
        status, out, err = run([sort], "heaplab", {"LD_DEBUG": what}, stdin="b\na\n", timeout=60)
        assert status == 0 and out == "a\nb\n", (what, status, out, err[-2000:])
        lines = err.splitlines()
        if what == "bindings":
            got = [l for l in lines if re.search(r"binding file \S*" + re.escape(lib) +
                                                 r" .*: normal symbol `getenv'", l)]
            assert not got, f"the library called getenv: {got}"
        else:
            init = next((i for i, l in enumerate(lines)
                         if re.search(r"calling init: \S*" + re.escape(lib), l)), None)
            assert init is not None, lines[-20:]
            after = [l for l in lines[init:] if "symbol=" + "heaplab_launcher_process" in l]
            assert not after, f"the launchers' mark looked up by dlsym: {after[:3]}"
    print("set-up of a plain program: no getenv, no symbol looked up after the constructor")


LAYOUT_LD = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "clients", "preload", "layout.ld")
# GCC's names for a copy of a static function it specialised (run.constprop.0)
CLONE = re.compile(r"^(.+?)\.(?:constprop|isra|part|cold)(?:\.\d+)*$")


def layout_stale_names(lib):
    """The names clients/preload/layout.ld places that `lib` does not define,
    as "section name (why)": each .text.NAME a function (nm: t, T, W, i), each
    .text.unlikely.NAME beside its .text.NAME, each .bss.NAME a zeroed
    variable (b, B) -- NAME.* (a static of a function: buf.2) at least one.
    A clone's name (run.constprop.0) is current when the library has that
    clone, or the function itself and no clone of it (at -O0 GCC clones
    nothing: make coverage's build)."""
    with open(LAYOUT_LD) as f:
        script = re.sub(r"/\*.*?\*/", " ", f.read(), flags=re.S)
    kinds = {}
    for line in subprocess.run(["nm", lib], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            kinds.setdefault(parts[2], set()).add(parts[1])

    def has(name, types):
        return bool(kinds.get(name, set()) & set(types))

    def function(name):
        if has(name, "tTWi"):
            return True
        clone = CLONE.match(name)
        if not clone:
            return False
        base = clone.group(1)
        return has(base, "tTWi") and not any(CLONE.match(k) and CLONE.match(k).group(1) == base
                                             for k in kinds)

    stale = []
    hot = re.findall(r"\*\(\.text\.(?!unlikely\.|startup\b)([^\s()]+)\)", script)
    cold = re.findall(r"\*\(\.text\.unlikely\.([^\s()]+)\)", script)
    assert len(hot) > 50, f"layout.ld read as {len(hot)} functions: {hot}"
    stale += [f".text.{n} (no such function)" for n in hot if not function(n)]
    stale += [f".text.unlikely.{n} (not in the list's .text names)" for n in cold
              if n not in hot]
    stale += [f".text.{n} (no .text.unlikely.{n} beside it)" for n in hot if n not in cold]
    for group in re.findall(r"\*\((\.bss\.[^()]*)\)", script):
        for sec in group.split():
            name = sec[len(".bss."):]
            if name.endswith(".*"):
                ok = any(k.startswith(name[:-1]) and has(k, "bB") for k in kinds)
            else:
                ok = has(name, "bB")
            if not ok:
                stale.append(f"{sec} (no such zeroed variable)")
    return stale


def layout_puts_what_runs_together():
    """clients/preload/layout.ld: the functions a preloaded program runs are
    together at the start of the text (.text.hl_hot), and the big zeroed
    buffers after the small variables in .bss (.bss.hl_cold) -- the kernel
    faults a file's pages in 64 KiB at a time, and the library's whole text
    was resident in every program (140 KiB; 64-104 with the layout, and its
    .bss 40 -> 12 KiB: bench-preload realloc's peak, session 43).  Read
    from the library's sections and symbols (readelf, nm).  And every name
    the list places is one the library defines (layout_stale_names): a
    renamed function matched nothing, silently left out (session 44)."""
    need(PRELOAD, "libheaplab-malloc.so")
    secs = subprocess.run(["readelf", "-SW", PRELOAD], capture_output=True, text=True,
                          check=True).stdout
    bounds = {}
    for m in re.finditer(r"\]\s+(\.\S+)\s+\S+\s+([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)", secs):
        bounds[m.group(1)] = (int(m.group(2), 16), int(m.group(2), 16) + int(m.group(3), 16))
    assert ".text.hl_hot" in bounds and ".bss.hl_cold" in bounds, sorted(bounds)
    syms = {}
    for line in subprocess.run(["nm", PRELOAD], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            syms[parts[2]] = int(parts[0], 16)

    def inside(name, sec):
        lo, hi = bounds[sec]
        return name in syms and lo <= syms[name] < hi

    # every name the list places is the library's: a function renamed or
    # removed matched nothing and left the hot list without a word (session 44)
    stale = layout_stale_names(PRELOAD)
    assert not stale, ("clients/preload/layout.ld names what libheaplab-malloc.so does not "
                       "define (renamed or removed? callgrind's list: layout.ld's comment): "
                       + ", ".join(stale))

    hot = ["malloc", "free", "realloc", "calloc", "setup", "at_start", "hl_heap_new",
           "hl__take_refill", "hl__manual_free_small", "tcache_for"]
    cold = [n for n in hot if not inside(n, ".text.hl_hot")]
    assert not cold, f"not in .text.hl_hot: {cold}"
    lo, hi = bounds[".text.hl_hot"]
    assert hi - lo <= 64 * 1024, f"the hot text is {hi - lo} bytes: more than a 64 KiB window"
    for big in ("say_line", "stats_path", "errno_numbered"):
        assert inside(big, ".bss.hl_cold"), f"{big} is not after the small variables"
    for small in ("heap_ptr", "state"):
        assert small in syms and not inside(small, ".bss.hl_cold"), small
    print(f"hot text {hi - lo} bytes at {lo:#x}; big buffers after .bss's small variables")


SCENARIOS = {f.__name__: f for f in (python_regrtest, lua_luacheck, sqlite3_script, c_threads,
                                     bad_option, small_page_option, collected_only_options,
                                     verify_refuses,
                                     verify_aborts_on_damage,
                                     clearenv_first, stats_relative_path, stats_write_errors,
                                     stderr_without_reader, exit_from_many_threads, exit_inside_exit, two_copies,
                                     renamed_copy,
                                     report_edges, child_report_paths,
                                     report_in_a_comma_locale,
                                     report_escapes_strings, report_without_proc,
                                     exit_without_handlers, own_malloc,
                                     exit_in_signal_handler, exit_in_glibc_malloc,
                                     exit_in_handler_inside_errlock,
                                     launcher_that_never_allocated,
                                     exit_beside_a_set_up, fork_beside_a_set_up,
                                     signal_to_itself, setup_leaves_libc_alone,
                                     layout_puts_what_runs_together,
                                     malloc_in_signal_handler)}


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
