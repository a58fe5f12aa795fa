"""E10 sparse survivors -- issue 18.

Protocol: fill 192 MiB of 64-256-byte objects (four fills of 48 MiB, one per
slot size: 64, 128, 192 and 256 bytes with the 8-byte header), keep every Nth
object of each (hl_thin: a new root holding objects 0, N, 2N ...), drop the
fills and collect until a collection releases nothing more; the lowest
footprint after the drop is the floor.  Then refill: the same four fills
again, with the survivors still live.

Arms (N = 10, 100, 1000 each; 64 KiB pages):
        off       page_release=False          nothing goes back (the seed's before)
        page      page release, whole pages   today's default
        subpage   + subpage_release=True      the empty OS pages of partial pages too
        compact   + compact=sparse            survivors of pages below 25% live move
        both      subpage_release + compact

Asserted effect (returned = footprint at the drop less the lowest after it;
dropped = what the fills cost less the survivors' bytes):
  N=100  compact and both return >= 90% of the dropped footprint, subpage >= 40%;
  N=10   compact and both return >= 80%;
  every arm: the refill costs no more than the first fill (1% of slack for
         the interpreter's own allocations);
  every N: the survivors' checksums are the same in every arm, before the
         drop, after it and after the refill.
Reported: what whole pages alone return (the issue measured 6.1% at 1 in 100
and 27.2% at 1 in 1000 on heaplab-python), off's ~0%, N=1000.

The same protocol on the real interpreters (heaplab-lua and heaplab-python,
manual mode: sub-page release only, against stock lua5.4 and python3) is the
second test below, test_e10_sparse_survivors_on_real_interpreters.

HEAPLAB_E10_FILL_MIB overrides the 192 MiB (the notebook runs smaller arms;
the thresholds are the protocol's, at 192 MiB, where the warm cache of 64
pages -- 4 MiB, which stays resident in every arm that releases -- is 2% of
the dropped footprint: at 16 MiB it is a quarter of it);
HEAPLAB_E10_N (a comma list) the survivor ratios; HEAPLAB_E10_OBJECTS the
real interpreters' 1.5 M objects.
"""
import os
import shutil
import sys

import pytest

import heaplab
from heaplab.harness import (ArmResult, Experiment, PhaseRecord, collect_until_settled, percent,
                             record_protocol, run_command_arm, save_arm, saving_interrupted)

# An arm's process may load this file by path; programs.py and protocol.py
# sit beside it.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import protocol  # noqa: E402
from programs import PROGRAMS, ROOT, launcher  # noqa: E402

MiB = 1 << 20
SIZES = (56, 120, 184, 248)          # payload bytes: + 8-byte header = 64, 128, 192, 256
# HEAPLAB_E10_N declares the arms, here; a bad value declares the protocol's
# and fails the test, naming it (E10.run checks its protocol first), not the
# suite's collection.  HEAPLAB_E10_FILL_MIB is read when an arm runs.
NS = protocol.E10_N.value_or_default()
ARMS = {
    "off": {"page_release": False},
    "page": {},
    "subpage": {"subpage_release": True},
    "compact": {"compact": "sparse"},
    "both": {"subpage_release": True, "compact": "sparse"},
}

E10 = Experiment("E10", "sparse survivors", seed={
    "page": "issue 18: heaplab-python 64 KiB pages returned 6.1% (1 in 100), 27.2% (1 in 1000)",
}, protocol=(protocol.E10_FILL_MIB, protocol.E10_N))


def fills(h):
    fill = int(protocol.E10_FILL_MIB.value() * MiB)
    return [h.fill(fill // len(SIZES), size) for size in SIZES]


def sparse_survivors(rec, every, **options):
    h = heaplab.Heap(**options)
    with rec.phase("fill", heap=h):
        made = fills(h)
    with rec.phase("thin", heap=h) as ph:
        kept = [h.thin(f, every) for f in made]
        sums = [list(k.checksum()) for k in kept]
        ph.note("checksums", sums)
    # each kept root holds its survivors: slot bytes = size + 8-byte header
    survivors = sum((n - 1) * (size + 8) for (_, n), size in zip(sums, SIZES))
    rec.note("survivor_bytes", survivors)
    rec.note("survivors", sum(n - 1 for _, n in sums))
    with rec.phase("drop", heap=h) as ph:
        ph.mark("drop")
        for f in made:
            f.release()
        ph.note("cycles", collect_until_settled(h, major=True, min_cycles=3))
        ph.note("checksums", [list(k.checksum()) for k in kept])
    with rec.phase("refill", heap=h) as ph:
        again = fills(h)
        ph.note("checksums", [list(k.checksum()) for k in kept])
    for r in again + kept:
        r.release()
    rec.note("warm_bytes", h.options["warm_pages"] * h.options["page_size"])
    h.close()


for n in NS:
    for arm, opts in ARMS.items():
        E10.add_arm(f"n{n}/{arm}", sparse_survivors, params={"every": n}, **opts)


def figures(data):
    """(fill cost, dropped, returned, fraction, refill cost) of one arm's
    records, bytes; works on the Lua arms' records too.  growth and
    returned are the harness's derived figures (derived_figures,
    PhaseRecord): a drop that was not marked is a ValueError saying so (it
    was phys_before - phys_after here, a figure heaplab report did not give)."""
    recs = {r["phase"]: PhaseRecord(r) for r in data["records"]}
    fill, drop, refill = recs["fill"], recs["drop"], recs["refill"]
    cost = fill.growth
    dropped = cost - data["notes"]["survivor_bytes"]
    returned = drop.returned
    refill_cost = refill.growth
    return cost, dropped, returned, returned / dropped, refill_cost


def arm_kind(arm):
    """The arm's kind (off, page, subpage, compact, both; an interpreter
    arm's subpage, page, stock) from its name: n100/compact, the Lua arm's
    lua-n100-compact, an interpreter arm's lua/n100/subpage."""
    return arm.split("/")[-1].split("-")[-1]


def threshold(arm, every):
    """The share of the dropped footprint an arm must return, or None."""
    kind = arm_kind(arm)
    if kind in ("compact", "both") and every == 100:
        return 0.90
    if kind in ("compact", "both") and every == 10:
        return 0.80
    if kind == "subpage" and every == 100:
        return 0.40
    return None


def interpreter_arm_effects(data):
    """An interpreter arm's effect (test_e10_sparse_survivors_on_real_interpreters,
    phases build, hold, drop): the share of the dropped footprint returned,
    >= 40% for subpage at 1 in 100.  It has no refill phase: no refill effect."""
    dropped, returned, frac = interpreter_figures(data)
    every = data["params"]["every"]
    t = 0.40 if arm_kind(data["arm"]) == "subpage" and every == 100 else None
    return [{"effect": "returned_fraction", "value": frac, "unit": "fraction", "threshold": t,
             "direction": ">=", "passed": None if t is None else frac >= t}]


def arm_effects(data):
    """E10's effects for ONE arm as numbers (heaplab run / compare; the Lua
    arms' and the interpreter arms' records too): the share of the dropped
    footprint returned, judged against this file's threshold for the arm's
    kind and N when there is one, and the refill's cost over the first
    fill's (<= 1.01).  A record with neither fill, drop and refill nor an
    interpreter arm's build and drop is a ValueError naming what it lacks."""
    phases = {r["phase"] for r in data["records"]}
    if "fill" not in phases and {"build", "drop"} <= phases:
        return interpreter_arm_effects(data)
    missing = [p for p in ("fill", "drop", "refill") if p not in phases]
    if missing:
        raise ValueError(f"E10 arm {data.get('arm')!r} has no phase {', '.join(missing)} "
                         f"(phases: {sorted(phases)}): not an E10 arm")
    cost, dropped, returned, frac, refill = figures(data)
    every = data["params"]["every"]
    t = threshold(data["arm"], every)
    return [
        {"effect": "returned_fraction", "value": frac, "unit": "fraction", "threshold": t,
         "direction": ">=", "passed": None if t is None else frac >= t},
        {"effect": "refill_over_fill", "value": refill / cost, "unit": "ratio", "threshold": 1.01,
         "direction": "<=", "passed": refill <= 1.01 * cost},
    ]


def pct(x):
    return percent(x)


def test_e10_sparse_survivors(lab):
    res = E10.run()
    lab.record(res)
    failures = []
    for n in NS:
        arms = {a: res[f"n{n}/{a}"] for a in ARMS}
        sums = {}
        for a, r in arms.items():
            cost, dropped, returned, frac, refill = figures(r.data)
            t = threshold(a, n)
            seed = "6.1% (issue, 1 in 100)" if (a, n) == ("page", 100) else \
                "27.2% (issue, 1 in 1000)" if (a, n) == ("page", 1000) else ""
            lab.effect("E10", f"returned, 1 in {n}",
                       f"{pct(frac)} of {dropped / MiB:.1f} MiB",
                       f">= {pct(t)}" if t else "reported", arm=f"n{n}/{a}", phase="drop",
                       seed=seed, ok=None if t is None else frac >= t)
            lab.effect("E10", f"refill, 1 in {n}",
                       f"{refill / MiB:.1f} MiB (first fill {cost / MiB:.1f})",
                       "<= first fill", arm=f"n{n}/{a}", phase="refill",
                       ok=refill <= 1.01 * cost)
            if t is not None and frac < t:
                failures.append(f"n{n}/{a}: returned {pct(frac)} of {dropped / MiB:.1f} MiB, "
                                f"expected >= {pct(t)}")
            if refill > 1.01 * cost:
                failures.append(f"n{n}/{a}: the refill cost {refill / MiB:.1f} MiB, the first "
                                f"fill {cost / MiB:.1f} MiB")
            phases = [r.phase(p).note("checksums") for p in ("thin", "drop", "refill")]
            if phases[0] != phases[1] or phases[0] != phases[2]:
                failures.append(f"n{n}/{a}: the survivors changed: {phases}")
            sums[a] = phases[0]
        same = len({repr(s) for s in sums.values()}) == 1
        lab.effect("E10", f"checksums, 1 in {n}", "identical" if same else "differ",
                   "identical in every arm", arm=f"n{n}", phase="thin", ok=same)
        if not same:
            failures.append(f"n{n}: checksums differ between arms: {sums}")
        # sanity: the arms did what they are about
        st = {a: arms[a].phase("drop")["stats"] for a in ARMS}
        assert st["subpage"]["subpage_runs"] > 0 and st["page"]["subpage_runs"] == 0
        assert st["compact"]["evacuated_objects"] > 0 and st["page"]["evacuated_objects"] == 0
    assert not failures, "\n".join(failures)

# ---- on real interpreters ------------------------------------------------------------
#
# E10 sparse survivors on real interpreters -- issue 18; E10's protocol with
# the objects made by Lua 5.4 and CPython themselves.
#
# Protocol (tests/clients/programs/sparse_survivors.lua and .py, one arm per
# process): build about 1.5 M small objects (strings / bytes of 64-256 bytes,
# made in order), drop all but every Nth and run the language's own full
# collection; the lowest footprint after the drop is the floor.
#
# Arms (per language):
#         subpage   heaplab-lua / heaplab-python, manual mode, subpage_release=true
#                   (compaction is a collected-mode mechanism: an interpreter's
#                   blocks are its own raw pointers)
#         page      the same launcher, whole pages only (today's default)
#         stock     the stock interpreter: lua5.4, and python3 (pymalloc over glibc)
# N = 100 for every arm; N = 10 and 1000 for subpage and stock.
#
# Asserted effect (returned = footprint at the drop less the lowest after it,
# dropped = footprint at the drop less the arm's baseline, as in E8):
#   subpage, 1 in 100: at least 40% of the dropped footprint comes back;
#   every arm of a language and N computes the same checksum of its survivors.
# Reported: page and stock (the issue measured 6.1% / 0% at 1 in 100 for
# heaplab-python 64 KiB pages / stock python3), N = 10 and 1000.
#
# HEAPLAB_E10_OBJECTS overrides the 1.5 M objects (the notebook runs smaller arms).
INTERPRETER_RUNS = [(100, "subpage"), (100, "page"), (100, "stock"), (10, "subpage"),
                    (10, "stock"), (1000, "subpage"), (1000, "stock")]
INTERPRETER_ENV = {"subpage": {"HEAPLAB_SUBPAGE_RELEASE": "true"}, "page": {}, "stock": {}}


def command(language, arm):
    if language == "lua":
        prog = os.path.join(PROGRAMS, "sparse_survivors.lua")
        if arm == "stock":
            lua = shutil.which("lua5.4")
            if lua is None:
                pytest.fail("lua5.4 is not installed: run tools/setup.sh")
            return [lua, prog]
        return [launcher("heaplab-lua", "HEAPLAB_LUA_LAUNCHER"), prog]
    prog = os.path.join(PROGRAMS, "sparse_survivors.py")
    if arm == "stock":
        return [sys.executable, prog]       # the stock CPython (pymalloc) this suite runs on
    return [launcher("heaplab-python", "HEAPLAB_PYTHON_LAUNCHER"), prog]


def run_interpreter_arm(language, every, arm, timeout=300):
    name = f"{language}/n{every}/{arm}"
    objects = protocol.E10_OBJECTS.value()
    def finish(data):
        data.setdefault("params", {})["environment"] = INTERPRETER_ENV[arm]
        record_protocol(data, (protocol.E10_OBJECTS,))
    with saving_interrupted(finish):
        data = run_command_arm(command(language, arm) + [name, str(every), str(objects)],
                               INTERPRETER_ENV[arm], cwd=ROOT, timeout=timeout,
                               label=f"E10 {name}", drop=("HEAPLAB_", "PYTHONMALLOC"))
    finish(data)
    save_arm(data)
    assert data["returncode"] == 0, f"E10 {name} exited {data['returncode']}:\n{data['stderr_tail']}"
    return ArmResult(data)


def interpreter_figures(arm):
    """(dropped, returned, fraction) in bytes, as E8's figures, of an
    ArmResult or an arm's JSON."""
    if isinstance(arm, dict):
        arm = ArmResult(arm)
    build, drop = arm.phase("build"), arm.phase("drop")
    dropped = drop["phys_before"] - build["phys_before"]
    return dropped, drop.returned, drop.returned / dropped


@pytest.mark.parametrize("language", ["lua", "python"])
def test_e10_sparse_survivors_on_real_interpreters(lab, language):
    results = {(n, a): run_interpreter_arm(language, n, a) for n, a in INTERPRETER_RUNS}
    lab.record(list(results.values()))
    failures = []
    for (n, a), r in results.items():
        dropped, returned, frac = interpreter_figures(r)
        asserted = a == "subpage" and n == 100
        seed = ""
        if language == "python" and n == 100:
            seed = {"page": "6.1% (issue)", "stock": "0% (issue)"}.get(a, "")
        lab.effect("E10", f"returned, 1 in {n}", f"{pct(frac)} of {dropped / MiB:.1f} MiB",
                   ">= 40%" if asserted else "reported", arm=f"{language}/n{n}/{a}",
                   phase="drop", seed=seed, ok=frac >= 0.40 if asserted else None)
        if asserted and frac < 0.40:
            failures.append(f"{language}/n{n}/{a}: only {pct(frac)} of {dropped / MiB:.1f} MiB "
                            f"came back")
        if a == "subpage":
            st = r.phase("drop")["stats"]
            assert st["subpage_runs"] > 0, f"{language}/n{n}/subpage released no OS page"
    for n in sorted({n for n, _ in INTERPRETER_RUNS}):
        sums = {a: r.phase("drop").note("checksum") for (m, a), r in results.items() if m == n}
        same = len({repr(s) for s in sums.values()}) == 1
        lab.effect("E10", f"checksums, 1 in {n}", "identical" if same else "differ",
                   "identical in every arm", arm=f"{language}/n{n}", phase="drop", ok=same)
        if not same:
            failures.append(f"{language}, 1 in {n}: checksums differ: {sums}")
    assert not failures, "\n".join(failures)
