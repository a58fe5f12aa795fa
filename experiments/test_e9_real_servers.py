"""E9 the page floor on a real server -- issue 17: "RSS never goes down after
I delete my keys", measured on Debian's redis-server driven by its own
client over loopback, with heaplab's manual mode as its malloc
(libheaplab-malloc.so, LD_PRELOAD) against the allocators people run it on.

Which server.  Debian's redis-server is linked against libjemalloc.so.2 but
calls the unprefixed malloc/free/realloc/calloc/malloc_usable_size (nm -D:
only mallctl, nallocx and malloc_stats_print are jemalloc's own names, and
none of them allocates), so LD_PRELOAD reaches every allocation: a preloaded
library's definitions come before the libraries the program needs.  Its
"glibc" arm therefore preloads libheaplab-malloc.so with
HEAPLAB_ALLOCATOR=libc, which hands each call to glibc's __libc_* entries;
without it the server would be on jemalloc.  memcached is reached by
LD_PRELOAD too, but keeps its 1 MiB slab pages for the life of the process
whatever the allocator (its own design), so it cannot show a page floor and
is not an arm here (docs/experiments/e9.md).

Protocol (one fresh server per arm, port chosen free on 127.0.0.1, no
persistence): start, then phases measured from outside by the harness's
sampler (/proc/PID/smaps_rollup every 20 ms):
  load     N keys (2,000,000; HEAPLAB_E9_KEYS) of 64-byte values sent with
           `redis-cli --pipe`; DBSIZE checked
  delete   FLUSHALL (synchronous), then the lowest footprint over up to 8 s
           (left early once it has not gone lower for 3 s)
  reload   the same keys again; DBSIZE and a sample of GETs checked
Arms: heaplab-on (page_release=true, the default), heaplab-off
(page_release=false), heaplab-refused (every primary release advice refused:
HEAPLAB_FAULT_RELEASE=always:ENOMEM), glibc, jemalloc, mimalloc.

Asserted effect:
  heaplab-on    returns >= 90% of the dropped footprint (footprint before
                the delete less the server's footprint before the load),
                lowest after FLUSHALL;
  heaplab-on    the reload costs no more than the first load: its footprint
                after the reload is at most 2% above the one after the load;
  heaplab-off   returns <= 20%;
  refused       the faults fired (the report's rejected or fallback pages),
                and the server still answered right.
The peers' figures are reported beside them, not asserted.
"""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from heaplab.harness import (ArmResult, percent, record_protocol, run_command_arm, save_arm,
                             saving_interrupted)

# protocol.py sits beside this file
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocol  # noqa: E402

MiB = 1 << 20
REDIS = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"
VALUE = b"v" * 56   # + an 8-digit counter = 64-byte values

ARMS = {
    "heaplab-on": ("heaplab", {}),
    "heaplab-off": ("heaplab", {"page_release": False}),
    "heaplab-refused": ("heaplab", {}),
    "glibc": ("glibc", {}),
    "jemalloc": ("jemalloc", {}),
    "mimalloc": ("mimalloc", {}),
}
ENV = {"heaplab-refused": {"HEAPLAB_FAULT_RELEASE": "always:ENOMEM"}}


def _keys():
    """HEAPLAB_E9_KEYS, checked (protocol.py)."""
    return protocol.E9_KEYS.value()


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _resp(n):
    """n SET commands in the Redis protocol, for redis-cli --pipe."""
    parts = []
    for i in range(n):
        k = b"key:%08d" % i
        v = VALUE + b"%08d" % i
        parts.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
    return b"".join(parts)


def _cli(port, *args, stdin=None, timeout=120):
    p = subprocess.run([REDIS_CLI, "-h", "127.0.0.1", "-p", str(port), *args], input=stdin,
                       capture_output=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(f"redis-cli {' '.join(args)}: exit {p.returncode}: "
                             f"{p.stderr.decode(errors='replace')[-500:]}")
    return p.stdout.decode(errors="replace").strip()


def _script(port, n, payload):
    def script(ctl):
        for _ in range(500):   # up to 10 s for the server to listen
            if not ctl.alive():
                raise AssertionError("redis-server exited at start")
            try:
                if _cli(port, "PING", timeout=5) == "PONG":
                    break
            except AssertionError:
                pass
            time.sleep(0.02)
        else:
            raise AssertionError("redis-server did not answer PING")
        with ctl.phase("load") as ph:
            out = _cli(port, "--pipe", stdin=payload, timeout=300)
            ph.note("pipe", out.splitlines()[-1] if out else "")
            assert int(_cli(port, "DBSIZE")) == n, "DBSIZE after the load"
            ph.note("used_memory", _info(port, "used_memory"))
        with ctl.phase("delete") as ph:
            ph.mark("FLUSHALL")
            assert _cli(port, "FLUSHALL") == "OK"
            ctl.wait_low(8.0, settle_s=3.0)
            assert int(_cli(port, "DBSIZE")) == 0
            ph.note("used_memory", _info(port, "used_memory"))
        with ctl.phase("reload") as ph:
            _cli(port, "--pipe", stdin=payload, timeout=300)
            assert int(_cli(port, "DBSIZE")) == n, "DBSIZE after the reload"
            for i in (0, n // 3, n - 1):
                got = _cli(port, "GET", "key:%08d" % i)
                assert got == (VALUE + b"%08d" % i).decode(), f"GET key:{i:08d} = {got!r}"
            ph.note("used_memory", _info(port, "used_memory"))
        ctl.note("answers_checked", True)
    return script


def _info(port, field):
    for line in _cli(port, "INFO", "memory").splitlines():
        if line.startswith(field + ":"):
            return int(line.split(":", 1)[1])
    return None


def missing():
    """Why E9 cannot run here (redis-server or redis-cli not installed), or None."""
    absent = [p for p in (REDIS, REDIS_CLI) if not os.path.exists(p)]
    if absent:
        return f"{' and '.join(absent)} not installed (tools/setup.sh preload installs them)"
    return None


def run_arm(arm, n, payload, timeout=600, save=True):
    """One arm: a fresh redis-server on `arm`'s allocator, driven through
    load / delete / reload.  save=False (a notebook) keeps the record out of
    the results folder."""
    why = missing()
    if why:
        pytest.fail(f"E9: {why}")
    allocator, options = ARMS[arm]
    port = _free_port()

    def finish(data):
        data.setdefault("params", {}).update({"keys": n, "value_bytes": 64,
                                              "environment": ENV.get(arm, {})})
        record_protocol(data, (protocol.E9_KEYS,))
    # (interrupted: the records so far saved, marked, as an Experiment arm's)
    with tempfile.TemporaryDirectory() as d, saving_interrupted(finish, save):
        cmd = [REDIS, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", d, "--protected-mode", "yes",
               "--loglevel", "warning"]
        data = run_command_arm(cmd, ENV.get(arm), cwd=d, timeout=timeout, allocator=allocator,
                               options=options, script=_script(port, n, payload),
                               experiment="E9", arm=f"redis/{arm}",
                               label=f"E9 redis/{arm}", interval_s=0.02)
    finish(data)
    if save:
        save_arm(data)
    assert data["error"] is None, f"E9 redis/{arm} failed:\n{data['error']}\n" \
                                  f"stderr: {data['stderr_tail']}"
    return ArmResult(data)


def figures(arm):
    """(dropped, returned, fraction, reload excess): dropped = footprint
    before the delete less the one before the load; returned = footprint
    before the delete less the lowest after FLUSHALL; reload excess = after
    the reload over after the load (1.0 = the same)."""
    load, delete, reload = arm.phase("load"), arm.phase("delete"), arm.phase("reload")
    dropped = delete["phys_before"] - load["phys_before"]
    returned = delete.returned
    return dropped, returned, returned / dropped, reload["phys_after"] / load["phys_after"]


def pct(x):
    return percent(x)


def test_e9_page_floor_on_redis(lab):
    n = _keys()
    payload = _resp(n)
    results = {arm: run_arm(arm, n, payload) for arm in ARMS}
    lab.record(results)
    fig = {arm: figures(r) for arm, r in results.items()}
    on, off = fig["heaplab-on"], fig["heaplab-off"]

    lab.effect("E9", "returned", f"{pct(on[2])} of {on[0] / MiB:.1f} MiB",
               ">= 90% of the dropped footprint", arm="redis/heaplab-on", phase="delete",
               ok=on[2] >= 0.90)
    lab.effect("E9", "reload / load footprint", f"{on[3]:.3f}", "<= 1.02",
               arm="redis/heaplab-on", phase="reload", ok=on[3] <= 1.02)
    lab.effect("E9", "returned", pct(off[2]), "<= 20%", arm="redis/heaplab-off",
               phase="delete", ok=off[2] <= 0.20)
    refused = results["heaplab-refused"].data["report"]["stats"]
    fired = refused["rejected_pages"] + refused["fallback_pages"]
    lab.effect("E9", "refused releases recorded", f"{fired} pages; returned "
               f"{pct(fig['heaplab-refused'][2])}", "> 0, answers right",
               arm="redis/heaplab-refused", phase="delete", ok=fired > 0)
    for arm in ("glibc", "jemalloc", "mimalloc"):
        d, r, f, re = fig[arm]
        lab.effect("E9", "returned (peer)", f"{pct(f)} of {d / MiB:.1f} MiB; reload/load "
                   f"{re:.3f}", "reported", arm=f"redis/{arm}", phase="delete", ok=None)

    report = results["heaplab-on"].data["report"]
    assert report and report["stats"]["manual_mallocs"] > n, \
        "heaplab-on: the report does not show the server's allocations on heaplab"
    assert on[2] >= 0.90, (f"redis/heaplab-on: only {pct(on[2])} of {on[0] / MiB:.1f} MiB "
                           f"came back ({on[1] / MiB:.1f} MiB)")
    assert on[3] <= 1.02, f"redis/heaplab-on: the reload's footprint is {on[3]:.3f}x the load's"
    assert off[2] <= 0.20, f"redis/heaplab-off: {pct(off[2])} came back with page_release off"
    assert fired > 0, f"redis/heaplab-refused: no refused release recorded: {refused}"
