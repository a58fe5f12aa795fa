"""E8 page floor on real interpreters -- issue 10; E1's protocol, with the
objects made by Lua 5.4 and CPython themselves, on heaplab's manual mode.

Protocol (tests/clients/programs/page_floor.lua and page_floor.py, one arm
per process): build about 192 MiB of small objects (Lua tables and strings;
Python lists, dicts and strings), hold them through a full collection, drop
them and run the language's own full collection (collectgarbage("collect") /
gc.collect()), then allocate a set of large buffers (12 x 16 MiB, every byte
written).  The arm is the launcher's environment:

Arms:   lua/on           heaplab-lua, page_release=true (the default)
        lua/off          heaplab-lua, page_release=false: the seed's "before"
        lua/libc         the same heaplab-lua binary on the C library's realloc/free
        python/on        heaplab-python, page_release=true
        python/off       heaplab-python, page_release=false
        python/pymalloc  heaplab-python on CPython's own allocators (what
                         `python3` uses: pymalloc arenas over malloc)
        python/malloc    the same with PYTHONMALLOC=malloc (glibc for everything)

Asserted effect:
  on   at least 90% of the dropped footprint (phys_footprint at the drop less
       the arm's baseline) comes back, lowest value after the drop;
  off  at most 20% comes back (what does is the interpreters' own large
       tables, which live on the system allocator in every arm);
  on   the peak while the buffers are made is lower than off's by at least
       90% of what on returned;
  all  the program computes the same checksum in every arm of a language.
The system allocator's figures are reported beside them, not asserted.

The launchers are built by `make` (ninja -C build); HEAPLAB_LUA_LAUNCHER and
HEAPLAB_PYTHON_LAUNCHER override where they are looked for; HEAPLAB_E8_MIB
overrides the 192 MiB (the notebooks run smaller arms).
"""
import os
import sys

import pytest

from heaplab.harness import (ArmResult, percent, record_protocol, run_command_arm, save_arm,
                             saving_interrupted)

# An arm's process may load this file by path; programs.py sits beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocol  # noqa: E402
from programs import LAUNCHERS, PROGRAMS, ROOT, launcher, missing_launchers  # noqa: E402

MiB = 1 << 20


def _size_mib():
    """HEAPLAB_E8_MIB, checked (protocol.py)."""
    return protocol.E8_MIB.value()


ARMS = {
    "lua": {
        "on": {},
        "off": {"HEAPLAB_PAGE_RELEASE": "false"},
        "libc": {"HEAPLAB_ALLOCATOR": "libc"},
    },
    "python": {
        "on": {},
        "off": {"HEAPLAB_PAGE_RELEASE": "false"},
        "pymalloc": {"HEAPLAB_ALLOCATOR": "libc"},
        "malloc": {"HEAPLAB_ALLOCATOR": "libc", "PYTHONMALLOC": "malloc"},
    },
}
SEED = {"on": "seed (JVM, 16 KiB pages): 66-68% returned", "off": "seed: ~0% returned"}


def missing():
    """Why E8 cannot run here (a launcher neither built nor on PATH), or None:
    the notebook skips on it where the test fails."""
    return missing_launchers(ARMS)


def run_arm(language, arm, env, timeout=300):
    """One arm in a fresh launcher process; its stdout is the arm's JSON
    (stderr is never parsed).  Saved under results/E8 like every arm."""
    if language == "lua":
        cmd = [launcher(*LAUNCHERS["lua"]),
               os.path.join(PROGRAMS, "page_floor.lua")]
    else:
        cmd = [launcher(*LAUNCHERS["python"]),
               os.path.join(PROGRAMS, "page_floor.py")]
    name = f"{language}/{arm}"
    # the arm's environment decides: no HEAPLAB_* option or PYTHONMALLOC of
    # the caller's leaks into an arm
    def finish(data):
        data["seed"] = SEED
        data.setdefault("params", {})["environment"] = env
        record_protocol(data, (protocol.E8_MIB,))
    with saving_interrupted(finish):
        data = run_command_arm(cmd + [name, str(_size_mib())], env, cwd=ROOT, timeout=timeout,
                               label=f"E8 {name}", drop=("HEAPLAB_", "PYTHONMALLOC"))
    finish(data)
    save_arm(data)
    assert data["returncode"] == 0, f"E8 {name} exited {data['returncode']}:\n{data['stderr_tail']}"
    return ArmResult(data)


def figures(arm):
    """(dropped, returned, fraction, peak while making the buffers), bytes:
    dropped = footprint at the drop less the arm's baseline (before build);
    returned = footprint at the drop less the lowest after it."""
    build, drop, buffers = arm.phase("build"), arm.phase("drop"), arm.phase("buffers")
    dropped = drop["phys_before"] - build["phys_before"]
    returned = drop.returned
    return dropped, returned, returned / dropped, buffers["phys_peak"] - build["phys_before"]


def pct(x):
    return percent(x)


@pytest.mark.parametrize("language", ["lua", "python"])
def test_e8_page_floor_on_real_interpreters(lab, language):
    results = {arm: run_arm(language, arm, env) for arm, env in ARMS[language].items()}
    lab.record(results)
    fig = {arm: figures(r) for arm, r in results.items()}
    on, off = fig["on"], fig["off"]
    name = lambda arm: f"{language}/{arm}"   # noqa: E731

    lab.effect("E8", "returned", pct(on[2]), ">= 90% of the dropped footprint", arm=name("on"),
               phase="drop", seed="66-68% (seed, 16 KiB pages)", ok=on[2] >= 0.90)
    lab.effect("E8", "returned", pct(off[2]), "<= 20%", arm=name("off"), phase="drop",
               seed="~0%", ok=off[2] <= 0.20)
    lowered = off[3] - on[3]
    lab.effect("E8", "peak lowered by", f"{lowered / MiB:.1f} MiB",
               f">= 90% of {on[1] / MiB:.1f} MiB returned", arm=name("on"), phase="buffers",
               ok=lowered >= 0.90 * on[1])
    for arm in ARMS[language]:
        if arm in ("on", "off"):
            continue
        d, r, f, peak = fig[arm]
        lab.effect("E8", "returned (system allocator)",
                   f"{pct(f)} of {d / MiB:.1f} MiB; buffers peak {peak / MiB:.1f} MiB",
                   "reported", arm=name(arm), phase="drop", ok=None)

    sums = {arm: r.phase("hold").note("checksum") for arm, r in results.items()}
    assert len(set(sums.values())) == 1, f"{language}: checksums differ between arms: {sums}"
    assert on[2] >= 0.90, (f"{language}/on: only {pct(on[2])} of {on[0] / MiB:.1f} MiB "
                           f"came back ({on[1] / MiB:.1f} MiB)")
    assert off[2] <= 0.20, f"{language}/off: {pct(off[2])} came back with page_release off"
    assert lowered >= 0.90 * on[1], (
        f"{language}: the buffers' peak is lower by {lowered / MiB:.1f} MiB, "
        f"on returned {on[1] / MiB:.1f} MiB")
    # heaplab's own residency agrees: the heap kept at most its warm cache
    # and a few pages per class after the drop
    drop = results["on"].phase("drop")
    warm = results["on"].notes["warm_bytes"]
    assert drop["resident_after"] <= warm + 16 * MiB, (
        f"{language}/on: {drop['resident_after'] / MiB:.1f} MiB of the heap still resident")
