"""heaplab compare / analysis.compare_runs of runs whose grids sweep
different options (session 20's hunt): the cells were merged on the option
names both runs share -- none shared, every cell of A was matched with
every cell of B (a cross product) and unrelated cells called different.
An option swept in one run only now has, in the other, that run's value
(its --env, else heaplab's default); runs whose cells never meet have no
effect in common (exit 2).  The run folders are written by hand: no arm
runs here."""
import glob
import itertools
import json
import os
import subprocess
import sys
import warnings

import pytest

pytest.importorskip("pandas")

from heaplab import analysis  # noqa: E402

pytestmark = pytest.mark.shares_the_machine


def make_run(folder, grid, effect_of, env=None, repeats=2, unit="MiB", offsets=None):
    """A run folder: meta.json and, per cell x repeat, one arm 'on' record
    of E1 with effect 'x' = effect_of(values) (+ offsets[k] for repeat k;
    0.001 k by default), in `unit`."""
    names = list(grid)
    cells = {f"c{i:03d}": dict(zip(names, combo))
             for i, combo in enumerate(itertools.product(*(grid[n] for n in names)))}
    os.makedirs(folder)
    meta = {"run_id": os.path.basename(folder), "experiment": "E1", "kind": "python",
            "arms": ["on"], "grid": grid, "cells": cells, "repeat": repeats,
            "env": env or {}, "arm_env": {}, "timeout": 600}
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f)
    for cell, values in cells.items():
        os.makedirs(os.path.join(folder, "E1", cell))
        for k in range(repeats):
            rec = {"experiment": "E1", "arm": "on", "records": [{"phase": "p"}],
                   "effects_numeric": [{"effect": "x", "value": effect_of(values) + (
                       0.001 * k if offsets is None else offsets[k]), "unit": unit}],
                   "sweep": {"key": f"E1-{cell}-on-r{k}", "cell": cell, "values": values,
                             "repeat": k, "arm": "on", "experiment": "E1", "status": "ok"}}
            with open(os.path.join(folder, "E1", cell, f"on.r{k}.json"), "w") as f:
                json.dump(rec, f)
    return str(folder)


def test_an_option_swept_in_one_run_meets_the_others_default(tmp_path):
    # A: warm_pages 0 and 64 (the default); B: release_per_sweep 1 and 1024
    # (the default), warm_pages at its default
    a = make_run(tmp_path / "a", {"warm_pages": ["0", "64"]},
                 lambda v: 10.0 if v["warm_pages"] == "0" else 20.0)
    b = make_run(tmp_path / "b", {"release_per_sweep": ["1", "1024"]},
                 lambda v: 50.0 if v["release_per_sweep"] == "1" else 20.0)
    t = analysis.compare_runs(a, b)
    # one cell meets: warm_pages=64 x release_per_sweep=1024 (both defaults)
    assert len(t) == 1, t
    row = t.iloc[0]
    assert (row["warm_pages"], row["release_per_sweep"]) == (64, 1024), t
    assert row["median_a"] == pytest.approx(20.0005) == row["median_b"], t
    assert not row["significant"]


def test_grids_that_never_meet_have_no_effect_in_common(tmp_path):
    a = make_run(tmp_path / "a", {"warm_pages": ["0", "256"]}, lambda v: 1.0)
    b = make_run(tmp_path / "b", {"release_per_sweep": ["1", "1024"]}, lambda v: 9.0)
    with pytest.raises(ValueError, match="no effect in common"):
        analysis.compare_runs(a, b)
    p = subprocess.run([sys.executable, "-m", "heaplab", "compare", a, b], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 2 and "no effect in common" in p.stderr, (p.stdout, p.stderr)
    # the other run's --env gives the value: B ran with HEAPLAB_WARM_PAGES=256
    b2 = make_run(tmp_path / "b2", {"release_per_sweep": ["1", "1024"]}, lambda v: 9.0,
                  env={"HEAPLAB_WARM_PAGES": "256"})
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        t = analysis.compare_runs(a, b2)
    assert len(t) == 1 and t.iloc[0]["warm_pages"] == 256, t
    assert any("different --env" in str(x.message) and "HEAPLAB_WARM_PAGES" in str(x.message)
               for x in w), [str(x.message) for x in w]


def test_values_are_compared_as_heaplab_reads_them(tmp_path):
    a = make_run(tmp_path / "a", {"page_size": ["16k", "64k"]}, lambda v: 1.0)
    b = make_run(tmp_path / "b", {"page_size": ["16384", "65536"]}, lambda v: 1.0)
    assert len(analysis.compare_runs(a, b)) == 2


def test_a_variable_swept_in_one_run_only_with_no_value_in_the_other_is_refused(tmp_path):
    a = make_run(tmp_path / "a", {"HEAPLAB_E1_FILL_MIB": ["16", "32"]}, lambda v: 1.0)
    b = make_run(tmp_path / "b", {}, lambda v: 1.0)
    with pytest.raises(ValueError, match="HEAPLAB_E1_FILL_MIB is swept in run A only"):
        analysis.compare_runs(a, b)
    b2 = make_run(tmp_path / "b2", {}, lambda v: 1.0, env={"HEAPLAB_E1_FILL_MIB": "32"})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = analysis.compare_runs(a, b2)
    assert list(t["HEAPLAB_E1_FILL_MIB"]) == [32], t


def _row(a, b, **kw):
    t = analysis.compare_runs(a, b, **kw)
    assert len(t) == 1, t
    return t.iloc[0]


def test_the_ratio_is_b_over_a_and_a_difference_beyond_the_spread_is_significant(tmp_path):
    # B's median twice A's: B/A is 2 (the CLI's column), not 0.5
    a = make_run(tmp_path / "a", {}, lambda v: 10.0, offsets=[0.0, 0.2])
    b = make_run(tmp_path / "b", {}, lambda v: 20.0, offsets=[0.0, 0.2])
    row = _row(a, b)
    assert (row["median_a"], row["median_b"]) == (pytest.approx(10.1), pytest.approx(20.1))
    assert row["ratio"] == pytest.approx(20.1 / 10.1) and row["significant"], row


def test_the_spread_is_the_larger_runs(tmp_path):
    # A's repeats agree, B's are 12 MiB apart: a difference of 10 MiB between
    # the medians is within B's run-to-run spread, not significant
    a = make_run(tmp_path / "a", {}, lambda v: 10.0, offsets=[0.0, 0.0])
    b = make_run(tmp_path / "b", {}, lambda v: 20.0, offsets=[-6.0, 6.0])
    row = _row(a, b)
    assert row["spread"] == pytest.approx(12.0) and not row["significant"], row


def test_a_difference_under_the_floor_is_not_significant(tmp_path):
    # both over the spread (repeats equal) and under the floor: 0.5 MiB
    # (the MiB floor is 1 MiB) and 0.5 points of a fraction (the floor is
    # the tolerance, 2 points -- relative to 0.015 it would be 0.0003)
    for unit, va, vb in (("MiB", 10.0, 10.5), ("fraction", 0.010, 0.015)):
        a = make_run(tmp_path / f"a-{unit}", {}, lambda v: va, unit=unit, offsets=[0.0, 0.0])
        b = make_run(tmp_path / f"b-{unit}", {}, lambda v: vb, unit=unit, offsets=[0.0, 0.0])
        row = _row(a, b)
        assert row["spread"] == 0 and not row["significant"], (unit, row)
        # well over the floor is significant
        c = make_run(tmp_path / f"c-{unit}", {}, lambda v: va + 6 * (vb - va), unit=unit,
                     offsets=[0.0, 0.0])
        assert _row(a, c)["significant"], unit


def test_a_failed_tasks_effects_are_no_part_of_the_medians(tmp_path):
    # a task that failed after its phases (the arm raised later, or exited
    # non-zero) has effects in its record: no measurement, left out of the
    # medians, the counts and the spread
    a = make_run(tmp_path / "a", {}, lambda v: 10.0, offsets=[0.0, 0.0])
    b = make_run(tmp_path / "b", {}, lambda v: 10.0, offsets=[0.0, 0.0])
    path = os.path.join(b, "E1", "c000", "on.r1.json")
    with open(path) as f:
        rec = json.load(f)
    rec["effects_numeric"][0]["value"] = 1000.0
    rec["error"] = "RuntimeError: late"
    rec["sweep"].update(status="failed", error="the arm raised: RuntimeError: late")
    with open(path, "w") as f:
        json.dump(rec, f)
    s = analysis.effect_summary(b)
    assert list(s["n"]) == [1] and list(s["max"]) == [10.0], s
    # (and compare says so, naming the task: session 40)
    with pytest.warns(UserWarning, match=r"run B \(.*\): 1 of 2 task\(s\) failed \(E1 cell "
                                         r"c000 on r1\): their effects are no part of the "
                                         r"medians") as got:
        row = _row(a, b)
    assert got[0].filename == __file__, got[0].filename     # the caller's line, not heaplab's
    assert (row["n_a"], row["n_b"], row["median_b"]) == (2, 1, 10.0) and not row["significant"]


def test_the_cli_compares_the_effects_asked_for_and_refuses_a_bad_tolerance(tmp_path):
    a = make_run(tmp_path / "a", {}, lambda v: 10.0)
    b = make_run(tmp_path / "b", {}, lambda v: 20.0)
    for run in (a, b):     # a second effect, which --effect x leaves out
        for path in glob.glob(os.path.join(run, "E1", "c000", "*.json")):
            with open(path) as f:
                rec = json.load(f)
            rec["effects_numeric"].append({"effect": "y", "value": 1.0, "unit": "MiB"})
            with open(path, "w") as f:
                json.dump(rec, f)

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "heaplab", "compare", a, b, *args],
                              capture_output=True, text=True, timeout=120)
    p = cli("--effect", "x", "--json")
    assert p.returncode == 0, p.stderr
    rows = json.loads(p.stdout)
    assert [(r["effect"], r["ratio"]) for r in rows] == [("x", pytest.approx(20.0005 / 10.0005))]
    # nan made nothing significant without a word, a negative share everything
    for bad in ("nan", "-0.5", "inf"):
        p = cli("--tolerance", bad)
        assert p.returncode == 2 and "--tolerance" in p.stderr and "expected" in p.stderr, \
            (bad, p.returncode, p.stderr)
