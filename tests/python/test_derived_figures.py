"""The derived figures of a phase record (phys_growth, phys_peak_growth,
phys_returned, resident_growth), session 32: the median record of repeats
that disagree on whether a phase was marked, and one definition for the
harness, the analysis frames and the sweep's effects.  Synthetic records
(test_analysis.py's helpers): fast, and no assertion depends on the
machine's load."""
import statistics

import pytest

from heaplab import analysis as hla
from heaplab.harness import PhaseRecord, median_arm
from test_analysis import MiB, arm, phase

pytestmark = pytest.mark.shares_the_machine


def drop_repeats(runs):
    """One arm run len(runs) times: a fill phase, then a drop phase whose
    (phys_before, lowest after the mark) in MiB is each run's, or
    (phys_before, None) for a repeat in which the drop was never marked
    (it ends at phys_before - 5 MiB)."""
    datas = []
    for k, (before, low) in enumerate(runs):
        fill = phase("E1", "on", "fill", 0, 0.0, 0.1, (10, before))
        if low is None:
            drop = phase("E1", "on", "drop", 1, 0.1, 0.2, (before, before - 5))
        else:
            drop = phase("E1", "on", "drop", 1, 0.1, 0.2, (before, low), marked=True)
        a = arm("E1", "on", [fill, drop])
        a["repeat"] = k
        datas.append(a)
    return datas


def test_median_of_repeats_that_disagree_on_the_mark_is_each_marked_repeats_own():
    """Repeat 1 of 3 never marked its drop.  The median record's
    phys_low_after_mark was repeat 0's (90 MiB: _median of a list with a
    None is the first value) beside the median phys_before (200 MiB), its
    derived phys_returned was left out (not every repeat had the parts),
    so PhaseRecord.returned fell back to 200 - 90 = 110 MiB: one run's low
    under the median's start, a figure no repeat had (each marked repeat
    returned 10 MiB).  Now every derived figure is the median of each
    repeat's own, over the repeats that have it, and the record says how
    many did (of_repeats) -- as heaplab report's wide() of the saved repeats."""
    datas = drop_repeats([(100, 90), (200, None), (300, 290)])
    m = median_arm(datas)
    drop = m["records"][1]
    assert drop["derived"]["phys_returned"] == 10 * MiB, drop["derived"]
    assert PhaseRecord(drop).returned == 10 * MiB, PhaseRecord(drop).returned / MiB
    # a part is the median of the repeats that have it too, never one run's
    assert drop["phys_low_after_mark"] == statistics.median([90, 290]) * MiB
    # (and the mark's notes, which only the marked repeats have: session 33)
    assert drop["of_repeats"] == {"phys_low_after_mark": 2, "phys_returned": 2,
                                  "notes.mark": 2, "notes.mark_s": 2}, drop
    assert m["repeats"] == 3
    # the figures every repeat has are the median of all three, no count
    assert drop["derived"]["phys_growth"] == -10 * MiB          # of -10, -5, -10
    assert m["records"][0].get("of_repeats") is None
    # the report of the saved repeats gives the same number
    report = hla.wide(datas, figures=["phys_returned"], unit="bytes")
    assert report.loc[("E1", "on", "drop"), "phys_returned"] == 10 * MiB
    # and so does the median record read on its own
    own = hla.wide(m, figures=["phys_returned"], unit="bytes")
    assert own.loc[("E1", "on", "drop"), "phys_returned"] == 10 * MiB
    # whichever repeat came first (the unmarked one took the figure away)
    m = median_arm([datas[1], datas[0], datas[2]])
    assert m["records"][1]["derived"]["phys_returned"] == 10 * MiB
    assert PhaseRecord(m["records"][1]).returned == 10 * MiB


def test_a_figure_no_repeat_has_is_absent_not_zero():
    """No repeat marked the drop: no phys_returned, no low after the mark,
    no count (the phase has no such figure, as a single run has not)."""
    m = median_arm(drop_repeats([(100, None), (200, None), (300, None)]))
    drop = m["records"][1]
    assert "phys_returned" not in drop["derived"]
    assert drop["phys_low_after_mark"] is None
    assert "of_repeats" not in drop
    frame = hla.records_frame(m, stats=False, notes=False)
    assert "phys_returned" not in set(frame["figure"])


# ---- one definition (heaplab.harness.DERIVED_FIGURES / derived_figures) ------------------

def _frame_derived(record):
    """The derived rows records_frame gives for one phase record."""
    a = arm(record["experiment"], record["arm"], [record])
    df = hla.records_frame(a, stats=False, notes=False)
    df = df[df["source"] == "derived"]
    return dict(zip(df["figure"], df["value"]))


def _property_figures(record):
    """What PhaseRecord's properties give, by derived figure name (ValueError: absent)."""
    out = {}
    for name, prop in (("phys_growth", "growth"), ("phys_peak_growth", "peak_growth"),
                       ("phys_returned", "returned")):
        try:
            out[name] = getattr(PhaseRecord(record), prop)
        except ValueError:
            pass
    return out


def _cases():
    marked = phase("E1", "on", "drop", 1, 0.1, 0.2, (200, 120), marked=True)
    unmarked = phase("E1", "on", "fill", 0, 0.0, 0.1, (10, 200))
    no_sample_after_mark = dict(marked, phys_low_after_mark=None)
    command = phase("E8", "cmd", "run", 0, 0.0, 0.1, (10, 50), marked=True, heap=False)
    command["phys_after"] = None        # the command exited: no reading after it
    median = median_arm(drop_repeats([(100, 90), (200, None), (300, 290)]))["records"][1]
    return [marked, unmarked, no_sample_after_mark, command, median]


def test_every_reader_takes_the_derived_figures_from_one_definition():
    """phys_growth, phys_peak_growth, phys_returned and resident_growth were
    written out in PhaseRecord, median_arm's DERIVED_PARTS, analysis's
    DERIVED and records_frame (and sweep_frame, and the sweep's
    returned_in_<phase> effect).  Every reader now gives derived_figures()'s
    figures, and only those."""
    from heaplab import harness
    from heaplab.sweep import effects_of
    assert set(hla.DERIVED) == set(harness.DERIVED_FIGURES) == set(harness.DERIVED_PARTS)
    for r in _cases():
        own = harness.derived_figures(r)
        assert _frame_derived(r) == own, (r["phase"], own)
        props = _property_figures(r)
        assert props == {k: v for k, v in own.items() if k != "resident_growth"}, (r, own)
        effects = {e["effect"]: e["value"] for e in effects_of({"records": [r]})}
        assert effects.get(f"returned_in_{r['phase']}") == (
            own["phys_returned"] / MiB if "phys_returned" in own else None)


def test_returned_of_a_phase_that_has_no_low_after_the_mark_is_an_error():
    """PhaseRecord.returned of a phase that was not marked (or had no sample
    after its mark) was phys_before - phys_after -- minus its growth, under
    the name of the lowest after the mark -- where records_frame and the
    report had no phys_returned for it (docs/analysis.md: marked phases
    only).  The analysis was right: no such figure, and now a ValueError
    that says why.  Likewise growth of a phase without phys_after was a
    TypeError (None - int)."""
    unmarked = phase("E1", "on", "fill", 0, 0.0, 0.1, (200, 195))
    assert "phys_returned" not in _frame_derived(unmarked)
    with pytest.raises(ValueError, match=r"no phys_returned .*not marked"):
        PhaseRecord(unmarked).returned
    no_sample = dict(phase("E1", "on", "drop", 1, 0.1, 0.2, (200, 120), marked=True),
                     phys_low_after_mark=None)
    with pytest.raises(ValueError, match="no sample came after its mark"):
        PhaseRecord(no_sample).returned
    # a median record of repeats none of which was marked
    m = median_arm(drop_repeats([(100, None), (200, None), (300, None)]))
    with pytest.raises(ValueError, match="none of the repeats had both"):
        PhaseRecord(m["records"][1]).returned
    command = phase("E8", "cmd", "run", 0, 0.0, 0.1, (10, 50), heap=False)
    command["phys_after"] = None
    with pytest.raises(ValueError, match="no phys_growth .*phys_after is None"):
        PhaseRecord(command).growth
    assert PhaseRecord(command).peak_growth == 41 * MiB


def test_sweep_frame_has_every_derived_figure_from_the_one_definition(tmp_path):
    """sweep_frame listed three derived figures by hand (SWEEP_DERIVED) and
    had no resident_growth column, which records_frame's derived rows and
    median_arm give.  Its derived columns are now DERIVED_FIGURES' names, each
    derived_figures()'s value for the phase (None where it has not both parts)."""
    import json
    from heaplab import harness
    run = tmp_path / "run"
    cell = run / "E1" / "c000"
    cell.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"run_id": "r", "grid": {}, "experiment": "E1"}))
    cases = [r for r in _cases() if "derived" not in r]       # what a task writes
    for k, r in enumerate(cases):
        sw = {"key": f"E1-c000-a{k}-r1", "status": "ok", "experiment": "E1", "cell": "c000",
              "arm": f"a{k}", "repeat": 1, "values": {}}
        data = {**arm("E1", f"a{k}", [dict(r, arm=f"a{k}")]), "sweep": sw}
        (cell / f"a{k}.r1.json").write_text(json.dumps(data))
    df = hla.sweep_frame(str(run))
    for name in harness.DERIVED_FIGURES:
        assert name in df.columns, (name, list(df.columns))
    assert any(harness.derived_figures(r).get("resident_growth") is not None for r in cases)
    for k, r in enumerate(cases):
        row = df[df["arm"] == f"a{k}"].iloc[0]
        own = harness.derived_figures(r)
        for name in harness.DERIVED_FIGURES:
            got = row[name]
            got = None if got is None or got != got else got
            assert got == own.get(name), (r["phase"], name, got, own.get(name))


def test_a_stat_or_note_some_repeats_lack_is_the_median_of_those_that_have_it():
    """A stat or a note null (or absent) in some repeats took the first
    repeat's value: null when that one had none, a note only later repeats
    had was left out -- where the derived figures and FIGURES are the
    median over the repeats that have them, counted in of_repeats.  Stats
    and notes (the phases' and the arm's) now follow the same rule: numbers
    the median, anything else the value of the repeats that have it, and
    of_repeats counts them ("stats.gc_ns": 2)."""
    datas = []
    for k, (gc_ns, cycles, label) in enumerate([(None, None, None), (10, 5, "x"), (30, 7, "x")]):
        notes = {"cycles": cycles}
        if label is not None:
            notes["label"] = label
        p = phase("E", "a", "p", 0, 0.0, 0.1, (10, 20), notes=notes,
                  stats={"gc_ns": gc_ns, "cycles": 1, "phases": {"mark_ns": gc_ns}})
        d = arm("E", "a", [p])
        d["notes"] = {"warm_bytes": cycles, "all": 4}
        d["repeat"] = k
        datas.append(d)
    m = median_arm(datas)
    r = m["records"][0]
    assert r["stats"]["gc_ns"] == 20 and r["stats"]["cycles"] == 1, r["stats"]
    assert r["stats"]["phases"] == {"mark_ns": 20}, r["stats"]
    assert r["notes"] == {"cycles": 6, "label": "x"}, r["notes"]
    assert r["of_repeats"] == {"stats.gc_ns": 2, "stats.phases.mark_ns": 2, "notes.cycles": 2,
                               "notes.label": 2}, r["of_repeats"]
    assert m["notes"] == {"warm_bytes": 6, "all": 4}, m["notes"]
    assert m["of_repeats"] == {"notes.warm_bytes": 2}, m
    # whichever repeat comes first
    m2 = median_arm([datas[1], datas[0], datas[2]])
    assert m2["records"][0]["stats"] == r["stats"] and m2["records"][0]["notes"] == r["notes"]
    # the analysis reads the median record's figure as the repeats' median
    frame = hla.records_frame(m, stats=True, notes=True)
    got = dict(zip(frame["figure"], frame["value"]))
    assert got["stats.gc_ns"] == 20 and got["notes.cycles"] == 6, got
    # a stat every repeat has: no count; one no repeat has: null, no count
    datas[1]["records"][0]["stats"]["gc_ns"] = None
    datas[2]["records"][0]["stats"]["gc_ns"] = None
    r = median_arm(datas)["records"][0]
    assert r["stats"]["gc_ns"] is None and "stats.gc_ns" not in r["of_repeats"], r


def test_a_phase_or_an_arm_that_failed_in_a_later_repeat_fails_in_the_median():
    """median_arm's record of a phase that raised in repeat 1 of 3 only (an
    arm that caught the phase's exception) says so -- its figures are no
    measurement -- and an arm error of any repeat is the median's (the
    strings are the first run's otherwise: 'ok', no error).  The mutation
    audit of session 37."""
    datas = drop_repeats([(100, 90), (200, 190), (300, 290)])
    datas[1]["records"][1]["status"] = "raised: RuntimeError: boom"
    datas[2]["error"] = "Traceback ...\nRuntimeError: late"
    m = median_arm(datas)
    assert m["records"][1]["status"] == "raised: RuntimeError: boom (repeat 1 of 3)", m["records"]
    assert m["records"][0].get("status", "ok") == "ok"
    with pytest.raises(ValueError, match="raised"):
        PhaseRecord(m["records"][1]).returned
    assert m["error"] == "Traceback ...\nRuntimeError: late", m["error"]
