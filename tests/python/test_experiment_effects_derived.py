"""The experiments' effects use the harness's derived figures, session 32.
E1's, E7's and E10's arm_effects computed "returned" by hand, falling back
to phys_after when the drop was not marked -- the old PhaseRecord rule,
an error in PhaseRecord.returned since derived figures were defined once
(heaplab.harness.derived_figures) -- and took a median record's parts
as a difference of medians.  So an experiment's returned_fraction could
stand where heaplab report and the sweep's returned_in_drop had no figure,
or a different one.  Now they read PhaseRecord / derived_figures: the
same number as the analysis layer, and a ValueError saying why when there
is none (the sweep keeps it as the arm_effects error).

No arm runs here: the arm JSON is written by hand."""
import os

import pytest

from heaplab.harness import derived_figures, median_arm
from heaplab.notebooks import experiment_module
from heaplab.sweep import effects_of

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MiB = 1 << 20

pytestmark = pytest.mark.shares_the_machine


def exp(name):
    return experiment_module(os.path.join(ROOT, "experiments", name))


def rec(phase, before, after, low=None, marked=None):
    """A phase record, MiB; `low` the lowest after the mark (None: not marked)."""
    return {"experiment": "E", "arm": "on", "phase": phase, "status": "ok",
            "phys_before": before * MiB, "phys_after": after * MiB,
            "phys_peak": max(before, after) * MiB + MiB,
            "phys_low_after_mark": None if low is None else low * MiB,
            "resident_before": before * MiB, "resident_after": after * MiB, "notes": {}}


def e1_arm(low):
    return {"experiment": "E1", "arm": "on", "options": {}, "params": {},
            "notes": {"warm_bytes": 2 * MiB},
            "records": [rec("fill", 10, 42), rec("drop", 42, 20, low=low),
                        rec("textures", 12, 44)]}


def e7_arm(low):
    return {"experiment": "E7", "arm": "exact", "options": {}, "params": {},
            "notes": {"warm_bytes": 2 * MiB},
            "records": [rec("build", 10, 42), rec("drop", 42, 20, low=low),
                        rec("scrub", 12, 12, low=12)]}


def e10_arm(low):
    return {"experiment": "E10", "arm": "n100/compact", "options": {}, "params": {"every": 100},
            "notes": {"survivor_bytes": 2 * MiB},
            "records": [rec("fill", 10, 42), rec("drop", 42, 20, low=low),
                        rec("refill", 12, 44)]}


CASES = [("test_e1_page_floor.py", e1_arm, "returned_fraction", 30 * MiB),
         ("test_e7_stale_roots.py", e7_arm, "drop_returned_fraction", 30 * MiB),
         ("test_e10_sparse_survivors.py", e10_arm, "returned_fraction", 30 * MiB)]


def effect(effects, name):
    (e,) = [e for e in effects if e["effect"] == name]
    return e


@pytest.mark.parametrize("path,make,name,denominator", CASES)
def test_returned_is_the_derived_figure_and_an_unmarked_drop_has_none(path, make, name,
                                                                     denominator):
    mod = exp(path)
    # marked: the fraction is derived_figures' phys_returned over the cost,
    # and the sweep's returned_in_drop is the same bytes
    data = make(low=11)
    e = effect(mod.arm_effects(data), name)
    drop = next(r for r in data["records"] if r["phase"] == "drop")
    assert derived_figures(drop)["phys_returned"] == 31 * MiB
    assert e["value"] * denominator == pytest.approx(31 * MiB), e
    assert effect(effects_of(data), "returned_in_drop")["value"] == 31
    # not marked: no figure (it was phys_before - phys_after, 22 MiB: a
    # returned_fraction beside no returned_in_drop and no report figure)
    data = make(low=None)
    with pytest.raises(ValueError, match="not marked"):
        mod.arm_effects(data)
    effects = effects_of(data, os.path.join(ROOT, "experiments", path))
    assert not [x for x in effects if x["effect"] in (name, "returned_in_drop")], effects
    assert "not marked" in effect(effects, "arm_effects")["error"], effects


@pytest.mark.parametrize("path,make,name,denominator", CASES)
def test_a_median_record_gives_the_median_of_each_repeats_own(path, make, name, denominator):
    """Three repeats whose drop began at 40, 42, 44 MiB and fell to 41, 11,
    31 after its mark: each returned -1, 31, 13 MiB, median 13 -- what the
    record's derived phys_returned, PhaseRecord.returned and heaplab report
    give; the hand-made figure took phys_before - phys_low_after_mark of the
    medians, 42 - 31 = 11 MiB, a figure no repeat had."""
    mod = exp(path)
    datas = []
    for k, (before, low) in enumerate(((40, 41), (42, 11), (44, 31))):
        d = make(low=low)
        d["records"][1]["phys_before"] = before * MiB
        d["repeat"] = k
        datas.append(d)
    m = median_arm(datas)
    drop = m["records"][1]
    assert drop["derived"]["phys_returned"] == 13 * MiB, drop["derived"]
    e = effect(mod.arm_effects(m), name)
    assert e["value"] * denominator == pytest.approx(13 * MiB), e["value"] * denominator / MiB


def test_the_lua_twins_returned_is_the_same_rule():
    """The Lua experiments' H.returned (experiments/lua/harness.lua) fell
    back to phys_after for a phase that was not marked too; it is an error
    now, as PhaseRecord.returned is, and the marked figure is unchanged."""
    import shutil
    import subprocess
    lua = shutil.which("lua5.4")
    build = os.environ.get("HEAPLAB_BUILD") or os.path.join(ROOT, "build")
    so = os.path.join(build, "bindings", "lua")
    if lua is None or not os.path.exists(os.path.join(so, "heaplab.so")):
        pytest.fail(f"needs lua5.4 and the Lua module at {so}/heaplab.so (make build)")
    env = {**os.environ, "LUA_CPATH": os.path.join(so, "?.so") + ";;",
           "LUA_PATH": os.path.join(ROOT, "experiments", "lua", "?.lua") + ";;"}
    code = ('local H = require "harness"\n'
            'print(H.returned{phase = "drop", phys_before = 42, phys_after = 20, '
            'phys_low_after_mark = 11})\n'
            'print(pcall(H.returned, {phase = "drop", phys_before = 42, phys_after = 20, '
            'phys_low_after_mark = H.null}))')
    p = subprocess.run([lua, "-e", code], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    marked, unmarked = p.stdout.splitlines()
    assert marked == "31", p.stdout
    assert unmarked.startswith("false") and "not marked" in unmarked, p.stdout


# ---- the Lua arms and the interpreter arms (session 33) -------------------------------------

def _effects(path, data):
    """effects_of(data) with the experiment's arm_effects, as the sweep's task does."""
    return effects_of(data, os.path.join(ROOT, "experiments", path))


def test_e7_arm_effects_read_the_lua_arms():
    """The Lua E7 arms reach E7's arm_effects through `heaplab run
    lua:e7_stale_roots` (the Python twin reads their records): the noise
    arm, lua-noise, has no range phase and was KeyError: 'range' (the
    sweep's arm_effects error, no pinned figure at all); lua-stale was
    judged as the precise arm (>= 97% at the drop: passed False for an arm
    whose own check passed).  Now the noise arm gives the kinds it ran,
    and the Lua arm is judged as its Python namesake."""
    def pinned(phase, mib):
        r = rec(phase, 10, 10, low=10)
        r["notes"] = {"pinned_bytes": mib * MiB, "kept_objects": 0, "kept_bytes": 0}
        return r
    noise = {"experiment": "E7", "arm": "lua-noise", "language": "lua", "options": {},
             "params": {"noise": True}, "notes": {"page_size": 65536},
             "records": [pinned("random", 0), pinned("exact", 4)]}
    effects = _effects("test_e7_stale_roots.py", noise)
    assert not [e for e in effects if e["effect"] == "arm_effects"], effects
    assert effect(effects, "random_pinned")["value"] == 0
    assert effect(effects, "exact_pinned")["value"] == 4
    stale = dict(e7_arm(low=41), arm="lua-stale", language="lua", params={"word": True})
    e = effect(_effects("test_e7_stale_roots.py", stale), "drop_returned_fraction")
    assert (e["threshold"], e["direction"], e["passed"]) == (0.05, "<=", True), e
    precise = dict(e7_arm(low=11), arm="lua-precise", language="lua")
    e = effect(_effects("test_e7_stale_roots.py", precise), "drop_returned_fraction")
    assert (e["threshold"], e["passed"]) == (0.97, True), e
    # a record of neither shape is named, not a KeyError
    other = dict(e7_arm(low=11), records=[rec("fill", 10, 42)])
    err = effect(_effects("test_e7_stale_roots.py", other), "arm_effects")["error"]
    assert err.startswith("ValueError: E7 arm 'exact' has no phase build, drop, scrub"), err


def test_e10_arm_effects_read_the_lua_and_the_interpreter_arms():
    """E10's arm_effects judged a Lua arm (lua-n100-compact: `heaplab run
    lua:e10_sparse_survivors`) by no threshold -- its kind was read as
    'lua-n100-compact' -- and an interpreter arm's record (lua/n100/subpage:
    phases build, hold, drop; results/E10/) was KeyError: 'fill'.  The Lua
    arm is judged as n100/compact (>= 90%), the interpreter arm by its own
    rule (the share of what the drop left charged above the build's start,
    >= 40% for subpage at 1 in 100)."""
    lua = dict(e10_arm(low=11), arm="lua-n100-compact", language="lua")
    e = effect(_effects("test_e10_sparse_survivors.py", lua), "returned_fraction")
    assert e["threshold"] == 0.90 and e["passed"] is True, e
    interp = {"experiment": "E10", "arm": "lua/n100/subpage", "options": {},
              "params": {"every": 100, "objects": 1500000, "language": "lua"}, "notes": {},
              "records": [rec("build", 10, 110), rec("hold", 110, 110),
                          rec("drop", 110, 60, low=50)]}
    effects = _effects("test_e10_sparse_survivors.py", interp)
    assert not [x for x in effects if x["effect"] == "arm_effects"], effects
    e = effect(effects, "returned_fraction")
    assert e["value"] == pytest.approx(60 / 100) and e["threshold"] == 0.40 and e["passed"], e
    assert not [x for x in effects if x["effect"] == "refill_over_fill"], effects
    stock = dict(interp, arm="python/n100/stock")
    e = effect(_effects("test_e10_sparse_survivors.py", stock), "returned_fraction")
    assert e["threshold"] is None and e["passed"] is None, e
    other = dict(interp, records=[rec("hold", 10, 10)])
    err = effect(_effects("test_e10_sparse_survivors.py", other), "arm_effects")["error"]
    assert "E10 arm 'lua/n100/subpage' has no phase fill, drop, refill" in err, err
