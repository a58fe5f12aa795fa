"""How the repeats of an arm pair, session 32: by position -- phase k of
each repeat with phase k of the others -- and only when phase k has one
name in every repeat.  median_arm (Experiment.run(repeat=N)'s ArmResult)
and heaplab.analysis's readers of the saved <arm>.r<k>.json files (wide,
heaplab report, the phase-cost plot) follow the one rule
(heaplab.harness.repeats_mismatch).  Before, median_arm paired by position
without looking at the names -- a repeat that recorded 'small' before 'big'
had its 'small' averaged into the others' 'big' (38 MiB of phys_growth,
the mean of 72 and 1.4) -- while wide() paired by (index, name) and listed
four rows, big, small, big, small: the two readers disagreed."""
import json
import os
import subprocess
import sys

import pytest

from heaplab import analysis as hla
from heaplab import harness
from heaplab.harness import ArmFailed, median_arm
from test_analysis import MiB, arm, phase

pytestmark = pytest.mark.shares_the_machine


def repeats(orders):
    """One arm run len(orders) times; each run's phases in the order given
    (names from big: 10 -> 80 MiB, small: 10 -> 12 MiB, fill: 10 -> 20 MiB)."""
    grow = {"big": (10, 80), "small": (10, 12), "fill": (10, 20)}
    datas = []
    for k, names in enumerate(orders):
        recs = [phase("XO", "a", n, i, 0.1 * i, 0.1 * (i + 1), grow[n])
                for i, n in enumerate(names)]
        a = arm("XO", "a", recs)
        a["repeat"] = k
        datas.append(a)
    return datas


def save(tmp_path, datas):
    d = tmp_path / "XO"
    d.mkdir(parents=True, exist_ok=True)
    for a in datas:
        (d / f"a.r{a['repeat']}.json").write_text(json.dumps(a))
    return tmp_path


SEQS = "repeat 0 ['big', 'small'], repeat 1 ['small', 'big']"


def test_repeats_in_another_order_are_refused_by_median_arm_and_the_report(tmp_path):
    datas = repeats([("big", "small"), ("small", "big")])
    # median_arm: 'big' was the mean of big and small (45 - 5 = 40 MiB here)
    with pytest.raises(ArmFailed) as e:
        median_arm(datas)
    assert SEQS in str(e.value) and "pair by position" in str(e.value), e.value
    # the report of the saved files: it listed big, small, big, small
    results = save(tmp_path, datas)
    with pytest.raises(ValueError) as e:
        hla.wide(str(results))
    assert SEQS in str(e.value) and "XO/a" in str(e.value), e.value
    with pytest.raises(ValueError, match=r"repeat 1 \['small', 'big'\]"):
        hla.plot_phase_cost(str(results))
    with pytest.raises(ValueError, match=r"repeat 1 \['small', 'big'\]"):
        hla.plot_footprint(str(results))
    # report refuses before it writes anything
    out = tmp_path / "out"
    with pytest.raises(ValueError, match=r"repeat 0 \['big', 'small'\]"):
        hla.report(str(results), out=str(out))
    assert not out.exists()
    # the command line says so, exit status 1 or 2, no traceback
    p = subprocess.run([sys.executable, "-m", "heaplab", "report", str(results), "--out",
                        str(out)], capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and SEQS in p.stderr and "Traceback" not in p.stderr, \
        (p.returncode, p.stderr[-2000:])
    # a different length with a disagreeing name is named the same way
    with pytest.raises(ArmFailed, match=r"repeat 0 \['big', 'small'\], repeat 1 \['small'\]"):
        median_arm(repeats([("big", "small"), ("small",)]))
    # and one that only lacks the last phase still names both sequences
    with pytest.raises(ArmFailed, match=r"repeat 0 \['big', 'small'\], repeat 1 \['big'\]"):
        median_arm(repeats([("big", "small"), ("big",)]))


def test_repeats_that_agree_pair_alike_in_median_arm_and_wide():
    """The same sequence (a name twice in it too): median_arm's record k
    and wide()'s row k are the same phase, with the same figures."""
    order = ("fill", "big", "fill", "small")
    datas = repeats([order, order, order])
    datas[1]["records"][1]["phys_after"] = 90 * MiB     # big's growth: 70, 80, 70
    m = median_arm(datas)
    assert [r["phase"] for r in m["records"]] == list(order)
    w = hla.wide(datas, figures=["phys_growth"], unit="bytes")
    assert list(w.index.get_level_values("phase")) == list(order)
    assert list(w["phys_growth"]) == [r["derived"]["phys_growth"] for r in m["records"]]
    assert m["records"][1]["derived"]["phys_growth"] == 70 * MiB
    assert harness.repeats_mismatch([(k, {i: r["phase"] for i, r in enumerate(d["records"])})
                                     for k, d in enumerate(datas)]) is None


def test_a_dropped_failed_phase_is_no_mismatch():
    """failed='drop' leaves a repeat's raised phase out: its position is
    missing, not renamed, and the other repeats' rows still pair."""
    datas = repeats([("big", "small"), ("big", "small")])
    datas[1]["records"][1]["status"] = "raised: RuntimeError: boom"
    w = hla.wide(datas, figures=["phys_growth"], unit="bytes", failed="drop")
    assert list(w.index.get_level_values("phase")) == ["big", "small"]


def test_a_real_run_whose_repeats_recorded_another_order_fails(tmp_path):
    """Experiment.run(repeat=2) of an arm whose second run records 'small'
    before 'big' (/tmp/h32har-w/exp_ord.py): its ArmResult's 'big' had the
    mean of the two phases' growth; now the run raises ArmFailed naming
    both sequences, and the saved repeats are refused by the report alike."""
    script = tmp_path / "exp_ord.py"
    ctr = tmp_path / "ctr"
    script.write_text(f"""
import os, heaplab
from heaplab.harness import Experiment
E = Experiment("XO", "order")
@E.arm("a")
def a(rec, **o):
    path = {str(ctr)!r}
    k = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(k + 1))
    h = heaplab.Heap()
    def big():
        with rec.phase("big", heap=h):
            r = h.fill(16 << 20, 256); del r
    def small():
        with rec.phase("small", heap=h):
            r = h.fill(1 << 20, 256); del r
    if k == 1:
        small(); big()
    else:
        big(); small()
if __name__ == "__main__":
    try:
        E.run(repeat=2)
    except Exception as e:
        print("RAISED", type(e).__name__, e)
    else:
        print("COMBINED")
""")
    results = tmp_path / "results"
    env = dict(os.environ, HEAPLAB_RESULTS=str(results))
    p = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True,
                       timeout=300, cwd=str(tmp_path))
    assert "RAISED ArmFailed" in p.stdout and SEQS in p.stdout, p.stdout + p.stderr[-2000:]
    with pytest.raises(ValueError, match=r"repeat 1 \['small', 'big'\]"):
        hla.wide(str(results))


def test_a_mismatched_arm_keeps_the_other_arms_results(experiment_source):
    """Experiment.run(repeat=2) where arm 'a' records its phases in another
    order in its second run: the ArmFailed of the mismatch discarded the
    other arms' ArmResults (their files were saved, the results gone).  The
    error now carries them (.results, as run() returns them) and the bad
    arm's runs (.repeats), raised once every arm has run."""
    mod = experiment_source("exp_ord_s33", f"""
import os, heaplab
from heaplab.harness import Experiment
E = Experiment("XO", "order")
def a(rec, **o):
    path = os.path.join(os.path.dirname(__file__), "ctr")
    k = int(open(path).read()) if os.path.exists(path) else 0
    open(path, "w").write(str(k + 1))
    names = ["small", "big"] if k == 1 else ["big", "small"]
    for n in names:
        with rec.phase(n):
            pass
def good(rec, **o):
    with rec.phase("fill"):
        pass
E.add_arm("good", good)
E.add_arm("a", a)
E.add_arm("last", good)
""")
    with pytest.raises(ArmFailed) as e:
        mod.E.run(repeat=2, timeout=120)
    err = e.value
    assert SEQS in str(err) and "XO/a" in str(err), str(err)
    assert list(err.results) == ["good", "last"], err.results
    for name in ("good", "last"):
        res = err.results[name]
        assert res.data["repeats"] == 2 and len(res.repeats) == 2, res.data
        assert [r["phase"] for r in res.records] == ["fill"]
    assert list(err.repeats) == ["a"] and len(err.repeats["a"]) == 2, err.repeats
    assert [[r["phase"] for r in x.records] for x in err.repeats["a"]] == [
        ["big", "small"], ["small", "big"]]
    assert ".results" in str(err), str(err)
