"""heaplab.analysis, session 31: what Experiment.run(repeat=N) returns, sweep
cells with mixed size spellings, note units, repeated phase names, the median
of repeats.  Synthetic records (test_analysis.py's helpers): fast, and no
assertion depends on the machine's load."""
import json
import os
import re

import pytest

from heaplab import analysis as hla
from heaplab.harness import ArmResult, PhaseRecord, median_arm
from test_analysis import MiB, arm, phase

pytestmark = pytest.mark.shares_the_machine


def repeated_on(starts=(0.0, 0.5, 1.0), durations=(0.2, 0.4, 0.3)):
    """Three runs of one arm whose phases ran at different times (as real
    repeats do), as Experiment.run(repeat=3) returns them: the median record
    with the runs in .repeats, each tagged repeat=k."""
    datas = []
    for k, (t0, d) in enumerate(zip(starts, durations)):
        recs = [phase("E1", "on", "fill", 0, t0, t0 + d, (10, 20 + k)),
                phase("E1", "on", "drop", 1, t0 + d, t0 + 2 * d, (20 + k, 11), marked=True)]
        a = arm("E1", "on", recs, series=[[t0 + 2 * d * i / 20, (10 + i) * MiB, 0, 0]
                                          for i in range(21)])
        a["repeat"] = k
        datas.append(a)
    res = ArmResult(median_arm(datas))
    res.repeats = [ArmResult(d) for d in datas]
    return res, datas


def test_an_arm_result_of_repeats_is_read_as_its_repeats(tmp_path):
    """Experiment.run(repeat=N)'s ArmResult was read as its median record:
    median phase times over the first run's series (samples in the wrong
    phase), one footprint line, no repeat column.  Now it is its repeats,
    as their saved <arm>.r<k>.json files are."""
    res, datas = repeated_on()
    live = hla.records_frame({"on": res})
    folder = tmp_path / "E1"
    folder.mkdir()
    for d in datas:
        (folder / f"on.r{d['repeat']}.json").write_text(json.dumps(d))
    saved = hla.records_frame(str(tmp_path))
    assert sorted(set(live["repeat"])) == [0, 1, 2]
    assert live.reset_index(drop=True).equals(saved.reset_index(drop=True))
    # every sample in its own run's phase
    s = hla.series_frame(res)
    assert len(s) == 3 * 21
    for d in datas:
        own = hla.series_frame(d)
        assert own["phase"].tolist() in [s.iloc[i:i + 21]["phase"].tolist()
                                         for i in range(0, len(s), 21)]
    fig = hla.plot_footprint({"on": res})
    assert any("median of 3" in t.get_text() for t in fig.legends[0].get_texts())
    assert hla.wide({"on": res}).loc[("E1", "on", "fill"), "phys_after"] == 21


def test_the_median_record_has_no_timeline_of_its_own():
    """Its duration_s was the median while t_start_s/t_end_s were medians of
    their own (duration != t_end - t_start) and its series the first run's."""
    res, _ = repeated_on()
    assert res.data["series"] == []
    for r in res.data["records"]:
        assert r["t_start_s"] is None and r["t_end_s"] is None
    assert res.data["records"][0]["duration_s"] == pytest.approx(0.3)
    # read as a raw dict it shows no samples rather than misplaced ones
    assert hla.series_frame(res.data).empty


def test_sweep_cells_sort_and_label_by_the_options_value(tmp_path):
    """--set page_size=128k,16k,65536: plot_effect's sort was a TypeError
    (int 65536 vs str '16k'), and cells sorted as text (128k, 16k, 64k) in
    the plots and the heat map's pivot.  Cells are sorted and labelled by
    the value as heaplab reads it (analysis.option_value, compare_runs')."""
    from test_compare_grids import make_run
    sizes = {"128k": 3.0, "16k": 1.0, "65536": 2.0}
    run = make_run(tmp_path / "run", {"page_size": list(sizes), "warm_pages": ["64", "0"]},
                   lambda v: sizes[v["page_size"]] + (0.5 if v["warm_pages"] == "64" else 0.0))
    fig = hla.plot_effect(run, "x")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["16384", "65536", "131072"]
    for line in ax.get_lines():
        ys = list(line.get_ydata())
        assert ys == sorted(ys), ys          # 16k < 64k < 128k: the effect grows with it
    heat = hla.plot_effect_heatmap(run, "x", "on")
    hax = heat.axes[0]
    assert [t.get_text() for t in hax.get_xticklabels()] == ["16384", "65536", "131072"]
    assert [t.get_text() for t in hax.get_yticklabels()] == ["0", "64"]
    img = hax.get_images()[0].get_array()
    assert list(img[0]) == pytest.approx([1.0005, 2.0005, 3.0005])
    assert hla.option_value("page_size", "16k") == hla.option_value("page_size", 16384) == 16384


ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def notes_the_experiments_write():
    """Every note key set in experiments/ (Python ph.note / rec.note /
    ctl.note, Lua ph:note / rec:note, notes["k"] = ...)."""
    keys = set()
    pat = re.compile(r"""(?:[.:]note\(\s*|notes\[)["']([A-Za-z0-9_]+)["']""")
    for root, _, files in os.walk(os.path.join(ROOT, "experiments")):
        for name in files:
            if name.endswith((".py", ".lua")):
                with open(os.path.join(root, name), encoding="utf-8") as f:
                    keys.update(pat.findall(f.read()))
    return keys


def test_every_note_the_experiments_write_has_a_unit():
    """notes.used_memory (E9, bytes) and E7's notes.page_size (bytes) were
    'count', E7's notes.mark_ms_per_cycle '' (ms): an integer note without a
    unit suffix fell to count unseen.  Each note key in experiments/ is named
    by its suffix, in NOTE_UNITS, or in NOTE_NOT_FIGURES (no row)."""
    keys = notes_the_experiments_write()
    assert {"used_memory", "page_size", "mark_ms_per_cycle", "cycles"} <= keys, sorted(keys)
    not_figures = getattr(hla, "NOTE_NOT_FIGURES", frozenset())
    # a float: the unit from the suffix or NOTE_UNITS, never the integer fallback
    unitless = sorted(k for k in keys if k not in not_figures
                      and hla.unit_of(k, 0.5, "note") == "")
    assert not unitless, f"notes without a unit (add them to NOTE_UNITS): {unitless}"
    r = phase("E7", "noise", "noise", 0, 0.0, 1.0,
              notes={"used_memory": 1000, "page_size": 16384, "mark_ms_per_cycle": 14.7,
                     "pipe": "OK", "word": 4096})
    df = hla.records_frame(arm("E7", "noise", [r]))
    units = df[df["source"] == "note"].set_index("figure")["unit"].to_dict()
    assert units["notes.used_memory"] == "bytes" and units["notes.page_size"] == "bytes"
    assert units["notes.mark_ms_per_cycle"] == "ms", units


def test_two_phases_of_an_arm_sharing_a_name_are_two_bars():
    """plot_phase_cost grouped by (arm, phase name): an arm's two 'textures'
    phases were one bar, 'median of 2', a min-max line between them.  They
    are two slots, textures#1 and textures#2 (by the phase's index)."""
    a = arm("E1", "on", [phase("E1", "on", "fill", 0, 0.0, 0.1, (10, 20)),
                         phase("E1", "on", "textures", 1, 0.1, 0.2, (20, 30)),
                         phase("E1", "on", "textures", 2, 0.2, 0.3, (30, 70))])
    fig = hla.plot_phase_cost(a, figures="phys_growth")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["fill", "textures#1", "textures#2"]
    assert [round(b.get_height()) for b in ax.patches] == [10, 10, 40]
    assert not any("median" in t for t in ax.get_legend_handles_labels()[1])
    assert "median" not in fig.get_suptitle()
    one = hla.plot_phase_cost(a, figures="phys_growth", phases=["textures#2"])
    assert [round(b.get_height()) for b in one.axes[0].patches] == [40]
    both = hla.plot_phase_cost(a, figures="phys_growth", phases="textures")
    assert [round(b.get_height()) for b in both.axes[0].patches] == [10, 40]
    # repeats of the arm (the same index) are still one bar, their median;
    # two arm families naming slot 0 differently (E4c) keep a slot each
    reps = []
    for k, top in enumerate((70, 90, 80)):
        r = json.loads(json.dumps(a))
        r["repeat"] = k
        r["records"][2]["phys_after"] = top * MiB
        reps.append(r)
    fig = hla.plot_phase_cost(reps, figures="phys_growth")
    assert [round(b.get_height()) for b in fig.axes[0].patches] == [10, 10, 50]
    assert any("median of 3" in t for t in fig.axes[0].get_legend_handles_labels()[1])
    other = arm("E1", "off", [phase("E1", "off", "backlog", 0, 0.0, 0.1, (10, 20)),
                              phase("E1", "off", "textures", 1, 0.1, 0.2, (20, 30))])
    fig = hla.plot_phase_cost([a, other], figures="phys_growth")
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == [
        "fill", "backlog", "textures#1", "textures#2"]


def test_median_arm_marks_a_phase_that_raised_in_any_repeat_and_agrees_with_the_report():
    """median_arm took the status string from the first run (a phase that
    raised in repeat 2 only was 'ok'), and computed returned / growth from
    medians of their parts (200 - 110 = 90 MiB) where heaplab report's
    wide() takes the median of each repeat's own figure (10 MiB)."""
    datas = []
    for k, (before, low) in enumerate(((100, 90), (200, 110), (300, 290))):
        fill = phase("E1", "on", "fill", 0, 0.0, 0.1, (10, before))
        drop = phase("E1", "on", "drop", 1, 0.1, 0.2, (before, low), marked=True)
        drop["phys_low_after_mark"] = low * MiB
        a = arm("E1", "on", [fill, drop])
        a["repeat"] = k
        datas.append(a)
    m = median_arm(datas)
    drop = PhaseRecord(m["records"][1])
    assert drop.returned == 10 * MiB, drop.returned / MiB
    assert drop.growth == statistics_median([low - b for b, low in
                                             ((100, 90), (200, 110), (300, 290))]) * MiB
    report = hla.wide(datas, figures=["phys_returned", "phys_growth"], unit="bytes")
    assert report.loc[("E1", "on", "drop"), "phys_returned"] == drop.returned
    assert report.loc[("E1", "on", "drop"), "phys_growth"] == drop.growth
    # the median record read on its own gives the same figures
    own = hla.wide(m, figures=["phys_returned"], unit="bytes")
    assert own.loc[("E1", "on", "drop"), "phys_returned"] == drop.returned
    # a phase that raised in repeat 1 only
    datas[1]["records"][0]["status"] = "raised: RuntimeError: boom"
    m = median_arm(datas)
    assert m["records"][0]["status"].startswith("raised: RuntimeError: boom"), m["records"][0]
    with pytest.raises(ValueError, match="raised"):
        PhaseRecord(m["records"][0]).growth
    assert m["records"][1].get("status", "ok") == "ok"


def statistics_median(values):
    import statistics
    return statistics.median(values)


def test_heat_map_cells_print_median_and_min_max(tmp_path):
    """A cell printed 'median ± half the spread' with a rounded median (20
    ±0.58 for repeats 19.55, 20.43, 20.71): now 'median (min–max)' with the
    decimals the spread needs."""
    import glob
    from test_compare_grids import make_run
    run = make_run(tmp_path / "run", {"page_size": ["16k"], "warm_pages": ["0"]},
                   lambda v: 0.0, repeats=3)
    for path in glob.glob(os.path.join(run, "E1", "*", "on.r*.json")):
        with open(path) as f:
            rec = json.load(f)
        rec["effects_numeric"][0]["value"] = (19.55, 20.43, 20.71)[rec["sweep"]["repeat"]]
        with open(path, "w") as f:
            json.dump(rec, f)
    fig = hla.plot_effect_heatmap(run, "x", "on")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["20.4\n(19.6–20.7)"], texts


def test_lua_pct_prints_what_python_percent_prints():
    """The Lua twin's H.pct printed '-0.0%' for a share that rounds to zero
    from below (Python's percent() was fixed for it: E1's off arm)."""
    import shutil
    import subprocess
    from heaplab.harness import percent
    lua = shutil.which("lua5.4")
    build = os.environ.get("HEAPLAB_BUILD") or os.path.join(ROOT, "build")
    so = os.path.join(build, "bindings", "lua")
    if lua is None or not os.path.exists(os.path.join(so, "heaplab.so")):
        pytest.fail(f"needs lua5.4 and the Lua module at {so}/heaplab.so (make build)")
    values = [-1e-5, -0.0004, 0.0, 0.973, -0.5, 1.0, 0.00049]
    env = {**os.environ, "LUA_CPATH": os.path.join(so, "?.so") + ";;",
           "LUA_PATH": os.path.join(ROOT, "experiments", "lua", "?.lua") + ";;"}
    code = ('local H = require "harness"; for _, x in ipairs{%s, 0/0} do print(H.pct(x)) end'
            % ", ".join(repr(v) for v in values))
    p = subprocess.run([lua, "-e", code], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [percent(v) for v in values] + ["nan%"], p.stdout


def test_the_cli_on_a_damaged_task_record_gives_a_cli_hint(tmp_path):
    """heaplab report / compare on a run with a damaged task record said
    'pass skipped=[] to run_records to load the others': a Python hint on
    the command line."""
    import subprocess
    import sys
    from test_compare_grids import make_run
    a = make_run(tmp_path / "a", {"warm_pages": ["0", "64"]}, lambda v: 1.0)
    b = make_run(tmp_path / "b", {"warm_pages": ["0", "64"]}, lambda v: 1.0)
    (tmp_path / "a" / "E1" / "c000" / "on.r0.json").write_text('{"half": ')
    (tmp_path / "b" / "E1" / "c000" / "on.r0.json").write_text('{"no": "task record"}')
    for args, run in ((["report", a], "a"), (["compare", a, b], "a"), (["compare", b, a], "b")):
        p = subprocess.run([sys.executable, "-m", "heaplab", *args], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 2, (p.stdout, p.stderr)
        assert "skipped=[]" not in p.stderr and "run_records" not in p.stderr, p.stderr
        assert os.path.join(run, "E1", "c000", "on.r0.json") in p.stderr, p.stderr
        assert f"then run heaplab {args[0]} again" in p.stderr, p.stderr


def test_report_failed_flag_marks_the_phases_csv(tmp_path):
    """report --failed flag wrote <exp>_phases.csv without a status column:
    a failed arm's figures stood there unmarked beside the good arm's."""
    import pandas as pd
    from test_analysis import e1_like, write_arms
    off, on = e1_like()
    on["error"] = "Traceback (most recent call last):\nRuntimeError: boom"
    off["records"][2]["status"] = "raised: MemoryError"
    results = write_arms(tmp_path / "results", [off, on])
    hla.report(str(results), out=str(tmp_path / "out"), failed="flag")
    csv = pd.read_csv(tmp_path / "out" / "E1_phases.csv")
    assert list(csv.columns)[-1] == "status", list(csv.columns)
    st = csv.set_index(["arm", "phase"])["status"]
    assert st[("off", "fill")] == "ok" and st[("off", "textures")] == "raised: MemoryError"
    assert all(st[("on", p)].startswith("arm failed: ")
               for p in ("fill", "drop", "textures")), st
    # a frame without failures, or failed='raise', keeps its columns
    assert "status" not in hla.wide(e1_like()).columns
