"""heaplab.analysis (results as DataFrames, plots, report) and the notebook
runner.  Synthetic arm records pin the frame's exact shape; one real E1 arm
pair, run small, checks the loader against what the harness really writes."""
import json
import os
import re
import subprocess
import sys

import pytest

from heaplab import analysis as hla
from heaplab.harness import FIGURES
from heaplab.notebooks import experiment_module

# no assertion here depends on the machine's load (no bounded wait, no sampled
# footprint): make test runs these beside the notebooks, the fuzzers and the
# soak (pyproject.toml's markers)
pytestmark = pytest.mark.shares_the_machine

MiB = 1 << 20
HERE = os.path.dirname(os.path.abspath(__file__))


def phase(experiment, arm, name, index, t0, t1, phys=(10, 20), marked=False, vmas=1,
          stats=None, notes=None, heap=True):
    """A phase record as the harness writes it (docs/harness.md), bytes in MiB steps."""
    before, after = phys[0] * MiB, phys[1] * MiB
    r = {"experiment": experiment, "arm": arm, "phase": name, "index": index,
         "t_start_s": t0, "t_end_s": t1, "duration_s": t1 - t0,
         "phys_before": before, "phys_after": after, "phys_peak": max(before, after) + MiB,
         "phys_low": min(before, after),
         "phys_low_after_mark": min(before, after) if marked else None,
         "rss_before": before + 4 * MiB, "rss_after": after + 4 * MiB,
         "rss_peak": max(before, after) + 5 * MiB, "lazyfree_before": 0, "lazyfree_after": 0,
         "anonymous_before": before, "anonymous_after": after,
         "anon_huge_before": 0, "anon_huge_after": 0,
         "resident_before": before - MiB if heap else None,
         "resident_after": after - MiB if heap else None,
         "vmas_after": vmas if heap else None, "samples": 7,
         "stats": stats if stats is not None else {"cycles": index, "released_pages": 3 * index,
                                                   "gc_ns": 1000 * index,
                                                   "small_bytes_since_cycle": 64},
         "notes": notes if notes is not None else {}}
    if marked:
        r["notes"] = dict(r["notes"], mark="drop", mark_s=(t0 + t1) / 2)
    return r


def arm(experiment, name, records, series=None, error=None):
    return {"experiment": experiment, "title": "synthetic", "arm": name, "options": {},
            "params": {}, "pid": 1, "error": error, "records": records, "notes": {},
            "series": series if series is not None else
            [[0.01 * i, (10 + i) * MiB, (14 + i) * MiB, 0] for i in range(40)]}


def write_arms(results, arms):
    """Each arm JSON as Experiment.run saves it (results/<experiment>/<arm>.json);
    returns results."""
    for a in arms:
        d = results / a["experiment"]
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{a['arm']}.json").write_text(json.dumps(a))
    return results


def e1_like():
    out = []
    for name, drop_to in (("off", 20), ("on", 11)):
        out.append(arm("E1", name, [
            phase("E1", name, "fill", 0, 0.0, 0.1, (10, 20)),
            phase("E1", name, "drop", 1, 0.1, 0.2, (20, drop_to), marked=True,
                  notes={"cycles": 2, "rate_mib_s": 1.5, "label": "text", "peak_large_live": 5}),
            phase("E1", name, "textures", 2, 0.2, 0.4, (drop_to, drop_to + 8)),
        ]))
    return out


def e5_like():
    """Like E5: vmas_after per round, counted mid-phase in the notes too."""
    out = []
    for name, vmas in (("off", [1, 1, 1, 1]), ("on", [512, 256, 512, 256])):
        recs = [phase("E5", name, f"round{k + 1}", k, 0.1 * k, 0.1 * k + 0.1, vmas=v,
                      notes={"vmas_after_release": v * 2, "vmas_after_reuse": v})
                for k, v in enumerate(vmas)]
        out.append(arm("E5", name, recs))
    return out


# ---- the tidy frame ---------------------------------------------------------------------

def test_frame_columns_units_and_one_row_per_arm_phase_figure():
    df = hla.records_frame(e1_like())
    assert list(df.columns) == hla.COLUMNS
    assert str(df["value"].dtype) == "float64" and str(df["index"].dtype) == "int64"
    key = ["experiment", "arm", "phase", "figure"]
    assert not df.duplicated(key).any(), df[df.duplicated(key, keep=False)]
    # every recorded figure (all non-null here except phys_low_after_mark on unmarked phases)
    rec = df[df["source"] == "record"]
    counts = rec.groupby(["arm", "phase"]).size()
    assert counts[("on", "drop")] == len(FIGURES) + 1           # + samples
    assert counts[("on", "fill")] == len(FIGURES)               # no mark: no low-after-mark row
    assert set(rec["figure"]) == set(FIGURES) | {"samples"}
    # units: bytes for the footprint figures, s for times, count for VMAs and samples
    unit = df.drop_duplicates("figure").set_index("figure")["unit"]
    for f in FIGURES:
        want = {"duration_s": "s", "vmas_after": "count"}.get(f, "bytes")
        assert unit[f] == want, f
    assert unit["samples"] == "count"
    assert unit["stats.cycles"] == "count" and unit["stats.gc_ns"] == "ns"
    assert unit["stats.small_bytes_since_cycle"] == "bytes"
    assert unit["notes.rate_mib_s"] == "MiB/s" and unit["notes.cycles"] == "count"
    assert unit["notes.mark_s"] == "s" and unit["notes.peak_large_live"] == "bytes"
    assert "notes.label" not in set(df["figure"]) and "notes.mark" not in set(df["figure"])
    # a note may share a counter's name: both are kept, told apart by prefix
    drop = df[(df["arm"] == "on") & (df["phase"] == "drop")].set_index("figure")["value"]
    assert drop["notes.cycles"] == 2 and drop["stats.cycles"] == 1


def test_frame_values_and_derived_figures():
    df = hla.records_frame(e1_like())
    v = df.set_index(["arm", "phase", "figure"])["value"]
    assert v["on", "fill", "phys_after"] == 20 * MiB
    assert v["on", "fill", "phys_growth"] == 10 * MiB
    assert v["on", "drop", "phys_returned"] == 9 * MiB           # 20 -> lowest 11
    assert v["off", "drop", "phys_returned"] == 0
    assert v["on", "drop", "phys_peak_growth"] == 1 * MiB
    assert v["on", "textures", "resident_growth"] == 8 * MiB
    assert ("on", "fill", "phys_returned") not in v.index        # not marked
    assert v["on", "textures", "duration_s"] == pytest.approx(0.2)
    mib = hla.to_unit(df, "MiB").set_index(["arm", "phase", "figure"])
    assert mib.loc[("on", "fill", "phys_after"), "value"] == 20
    assert mib.loc[("on", "fill", "phys_after"), "unit"] == "MiB"
    assert mib.loc[("on", "fill", "duration_s"), "unit"] == "s"


def test_frame_drops_nulls_and_optional_sources():
    a = arm("X", "a", [phase("X", "a", "nohheap", 0, 0, 1, heap=False, stats={}, notes={})])
    df = hla.records_frame(a)
    assert "resident_after" not in set(df["figure"]) and "vmas_after" not in set(df["figure"])
    only = hla.records_frame(e1_like(), stats=False, notes=False, derived=False)
    assert set(only["source"]) == {"record"}


def test_wide_table_is_arm_by_phase_in_mib():
    t = hla.wide(hla.records_frame(e1_like()))
    assert list(t.index.names) == ["experiment", "arm", "phase"]
    assert list(t.index) == [("E1", a, p) for a in ("off", "on")
                             for p in ("fill", "drop", "textures")]
    assert t.loc[("E1", "on", "drop"), "phys_after"] == 11
    assert t.loc[("E1", "on", "drop"), "phys_returned"] == 9


def test_wide_and_the_phases_csv_show_the_median_of_repeats(tmp_path):
    """--repeat's <arm>.r<k>.json: wide() (and so <exp>_phases.csv) showed the
    first repeat's value, beside a phase-cost plot of the median."""
    folder = tmp_path / "E1"
    folder.mkdir()
    for k, after in enumerate((100, 20, 30)):
        a = arm("E1", "on", [phase("E1", "on", "fill", 0, 0.0, 0.1, (10, after))])
        a["repeat"] = k
        (folder / f"on.r{k}.json").write_text(json.dumps(a))
    t = hla.wide(str(tmp_path), figures=["phys_after", "phys_growth"])
    assert len(t) == 1
    assert t.loc[("E1", "on", "fill"), "phys_after"] == 30
    assert t.loc[("E1", "on", "fill"), "phys_growth"] == 20
    hla.report(str(tmp_path))
    import pandas as pd
    csv = pd.read_csv(tmp_path / "report" / "E1_phases.csv")
    assert csv.loc[0, "phys_after"] == 30, csv


def test_series_and_phase_boundaries():
    s = hla.series_frame(e1_like())
    assert list(s.columns) == hla.SERIES_COLUMNS
    assert len(s) == 2 * 40
    assert s.loc[s["t_s"] == 0.05, "phase"].iloc[0] == "fill"
    assert s.loc[(s["t_s"] - 0.39).abs() < 1e-9, "phase"].iloc[0] == "textures"
    ph = hla.phases_frame(e1_like())
    assert list(ph.columns) == hla.PHASE_COLUMNS and len(ph) == 6
    drop = ph[(ph["arm"] == "on") & (ph["phase"] == "drop")].iloc[0]
    assert drop["mark"] == "drop" and drop["mark_s"] == pytest.approx(0.15)


def test_sources_accepted_and_refused(tmp_path):
    arms = e1_like()
    folder = tmp_path / "results" / "E1"
    folder.mkdir(parents=True)
    for a in arms:
        (folder / f"{a['arm']}.json").write_text(json.dumps(a))
    (folder / "records.csv").write_text("not an arm\n")
    (folder / "other.json").write_text(json.dumps({"not": "an arm"}))
    base = hla.records_frame(arms)
    for src in (tmp_path / "results", str(folder), str(folder / "on.json"), arms[1],
                {"off": arms[0], "on": arms[1]}, [arms[0], [arms[1]]]):
        got = hla.records_frame(src)
        want = base if len(hla.arms(src)) == 2 else base[base["arm"] == "on"]
        assert len(got) == len(want), src
    with pytest.raises(TypeError, match="cannot read results from int"):
        hla.records_frame(42)
    with pytest.raises(ValueError, match="no such file or folder"):
        hla.records_frame(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no arm results"):
        hla.records_frame(tmp_path / "empty")
    with pytest.raises(ValueError, match="keys"):
        hla.records_frame({"records": []})
    with pytest.raises(ValueError, match="name one with experiment="):
        hla.plot_footprint(e1_like() + e5_like())
    with pytest.raises(ValueError, match="no arms of experiment 'E9'"):
        hla.plot_footprint(e1_like(), experiment="E9")
    with pytest.raises(ValueError, match=r"no arm\(s\) \['middle'\]"):
        hla.plot_footprint(e1_like(), arms=["middle"])
    with pytest.raises(ValueError, match=r"no figure\(s\) \['nope'\]"):
        hla.plot_phase_cost(e1_like(), figures=("nope",))
    with pytest.raises(ValueError, match=r"no phase\(s\) \['nope'\]"):
        hla.plot_phase_cost(e1_like(), phases=["nope"])
    with pytest.raises(ValueError, match="unit 'KiB'"):
        hla.to_unit(base, "KiB")


# ---- plots ------------------------------------------------------------------------------

def test_footprint_plot_overlays_the_arms_with_phases_aligned():
    fig = hla.plot_footprint(e1_like())
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["fill", "drop", "textures"]
    assert "phys_footprint, MiB" in ax.get_ylabel() and "seconds" in ax.get_xlabel()
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[:2] == ["off", "on"]
    lines = [ln for ln in ax.get_lines() if ln.get_linestyle() in ("-", "--")
             and len(ln.get_xdata()) > 2]
    styles = {ln.get_linestyle() for ln in lines}
    assert styles == {"-", "--"}, "off dashed, on solid"
    colours = {ln.get_color() for ln in lines}
    assert len(colours) == 1, "an off/on pair shares a colour"
    # the phase slots: every arm's phase k starts at the same x
    starts = sorted({round(float(ln.get_xdata()[0]), 6) for ln in lines})
    assert starts == [0.0, 0.1, 0.2]
    # the series runs past the last phase (t up to 0.39 s, the last phase
    # ends at 0.4 s): nothing is drawn after the phases end
    assert max(float(max(ln.get_xdata())) for ln in ax.get_lines()) <= 0.4 + 1e-9
    panels = hla.plot_footprint(e1_like(), overlay=False)
    axes = panels.axes
    assert len(axes) == 2
    assert [a.get_ylabel().split("\n")[0] for a in axes] == ["off", "on"]
    assert len(axes[0].lines) >= 2                   # phys and rss


def test_footprint_plot_drops_samples_after_the_heap_closed():
    """A false drop to 0: samples taken after the last phase (the arm closed
    its heap) are not part of any phase and are not drawn."""
    a = e1_like()[1]
    a["series"] = a["series"] + [[0.45, 0.0, 0.0, 0], [0.5, 0.0, 0.0, 0]]
    for overlay in (True, False):
        fig = hla.plot_footprint(a, overlay=overlay)
        ys = [y for ln in fig.axes[0].get_lines() for y in ln.get_ydata()
              if len(ln.get_xdata()) > 2]
        assert min(ys) >= 10, (overlay, min(ys))


def test_repeats_show_median_and_spread():
    reps = []
    for k, scale in enumerate((1.0, 1.2, 0.8)):
        for a in e1_like():
            a = json.loads(json.dumps(a))
            a["repeat"] = k
            a["series"] = [[t, p * scale, r, lf] for t, p, r, lf in a["series"]]
            for r in a["records"]:
                r["phys_after"] = int(r["phys_after"] * scale)
            reps.append(a)
    fig = hla.plot_footprint(reps)
    ax = fig.axes[0]
    assert ax.collections, "the min-max band"
    assert any("median of 3" in t.get_text() for t in fig.legends[0].get_texts())
    cost = hla.plot_phase_cost(reps)
    assert any(len(c.get_segments()) for a in cost.axes for c in a.collections), "min-max lines"
    assert "median" in cost.get_suptitle()


def test_bar_labels_never_overlap():
    """Value labels are drawn only where they fit (flat, or turned upright)."""
    many = []
    for i in range(8):
        for a in e1_like():
            a = json.loads(json.dumps(a))
            a["arm"] = f"{a['arm']}_{i}"
            for r in a["records"]:
                r["arm"] = a["arm"]
            many.append(a)
    fig = hla.plot_phase_cost(many, width=6.0)
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        boxes = [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]
        for i, b in enumerate(boxes):
            for c in boxes[i + 1:]:
                assert not b.overlaps(c) or b.intersection(b, c).width < 1, (b, c)


def test_phase_cost_and_vma_plots():
    fig = hla.plot_phase_cost(e1_like())
    assert len(fig.axes) == 2
    assert fig.axes[0].get_ylabel() == "footprint the phase left (MiB)"
    assert fig.axes[1].get_ylabel() == "phase duration (s)"
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()] == ["fill", "drop", "textures"]
    heights = sorted(round(p.get_height()) for p in fig.axes[0].patches)
    assert heights == [-9, 0, 8, 8, 10, 10]
    v = hla.plot_vmas(e5_like())
    ax = v.axes[0]
    assert ax.get_yscale() == "log"                  # 1 against 512
    assert [list(line.get_ydata()) for line in ax.get_lines()] == [[1, 1, 1, 1],
                                                                   [512, 256, 512, 256]]
    two = hla.plot_vmas(e5_like(), figures=("notes.vmas_after_release", "notes.vmas_after_reuse"))
    assert len(two.axes[0].get_lines()) == 4
    with pytest.raises(ValueError, match="vmas_after"):
        hla.plot_vmas([arm("X", "a", [phase("X", "a", "p", 0, 0, 1, heap=False)])])


# ---- the report command -------------------------------------------------------------------

def run_cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "heaplab", *args], capture_output=True,
                          text=True, timeout=120, **kw)


def test_report_plots_vmas_only_when_their_count_changes(tmp_path):
    """A heap with dump_unused=0 (the launchers', E8) is two VMAs throughout:
    no VMA plot of a flat line (the plot was made past one VMA)."""
    results = tmp_path / "results" / "E8"
    results.mkdir(parents=True)
    # (and arms flat at different counts -- E10's collected heaps at 1 VMA,
    # its launchers' at 2 -- are no change: the report drew their flat lines)
    for name, n in (("stock", 2), ("heaplab", 2), ("collected", 1)):
        a = arm("E8", name, [phase("E8", name, "load", 0, 0.0, 0.1, (10, 20), vmas=n),
                             phase("E8", name, "drop", 1, 0.1, 0.2, (20, 12), vmas=n)])
        (results / f"{name}.json").write_text(json.dumps(a))
    out = tmp_path / "plots"
    p = run_cli("report", str(tmp_path / "results"), "--out", str(out))
    assert p.returncode == 0, p.stderr
    assert "E8_vmas.png" not in os.listdir(out) and "E8_footprint.png" in os.listdir(out)
    assert "E8: the heap's VMA count did not change within a run (1 or 2 throughout)" \
        in p.stdout, p.stdout


def test_report_takes_the_benchmarks_records_as_what_they_are(tmp_path):
    """make bench writes results/bench beside make experiments' results: report
    wrote an empty bench_footprint.png, then exit 2 ("experiment bench: no
    figure(s) ['phys_growth']") -- the bench hunt, session 27.  Now the bench
    records get their CSV and a line saying why no plot."""
    results = write_arms(tmp_path / "results", e1_like())
    bench = results / "bench"
    bench.mkdir()
    for name, ns in (("binary-trees/heaplab", 5e8), ("binary-trees/mimalloc", 4e8)):
        recs = [{"experiment": "bench", "arm": name, "phase": f"run{i + 1}", "index": i,
                 "duration_s": ns / 1e9, "rss_peak": 50 * MiB, "tree_phases": None,
                 "notes": {"time_ns": ns, "checksum": "0x1", "vmhwm_bytes": 50 * MiB}}
                for i in range(3)]
        (bench / (name.replace("/", "_") + ".json")).write_text(json.dumps(
            {"experiment": "bench", "title": "binary-trees", "arm": name, "options": {},
             "params": {"depth": 8}, "pid": None, "error": None, "records": recs,
             "notes": {"workload": "binary-trees"}, "series": []}))
    out = tmp_path / "plots"
    p = run_cli("report", str(results), "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    assert {n for n in os.listdir(out) if n.startswith("bench")} == {"bench_records.csv"}
    assert "E1_footprint.png" in os.listdir(out)
    assert "bench: no footprint in its records (the benchmark's: its table is " \
        "bench/table.txt" in p.stdout, p.stdout


def test_report_writes_the_expected_files(tmp_path):
    results = write_arms(tmp_path / "results", e1_like() + e5_like())
    out = tmp_path / "plots"
    p = run_cli("report", str(results), "--out", str(out))
    assert p.returncode == 0, p.stderr
    want = {f"E1_{x}" for x in ("footprint.png", "phase_cost.png", "records.csv", "phases.csv")}
    want |= {f"E5_{x}" for x in ("footprint.png", "phase_cost.png", "vmas.png", "records.csv",
                                 "phases.csv")}
    assert set(os.listdir(out)) == want                  # E1 has 1 VMA throughout: no VMA plot
    for name in want:
        if name.endswith(".png"):
            with open(out / name, "rb") as f:
                assert f.read(8) == b"\x89PNG\r\n\x1a\n", name
            assert os.path.getsize(out / name) > 10_000, name
    assert "E1: the heap's VMA count did not change within a run (1 throughout)" in p.stdout
    # the CSV is the tidy frame
    import pandas as pd
    csv = pd.read_csv(out / "E1_records.csv")
    assert list(csv.columns) == hla.COLUMNS and len(csv) == len(hla.records_frame(e1_like()))
    # default output folder: RESULTS/report
    written = hla.report(str(results / "E1"))
    assert str(results / "E1" / "report" / "E1_footprint.png") in written
    assert os.path.exists(results / "E1" / "report" / "E1_footprint.png")


FULL_DISK = """
import resource, signal, sys
from heaplab import analysis as hla     # (imports and caches written before the limit)
import matplotlib.pyplot
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # a write past the limit fails with EFBIG
limit = int(sys.argv[3])
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
try:
    hla.report(sys.argv[1], sys.argv[2])
except OSError as e:
    print("failed:", e)
    sys.exit(3)
"""


def test_a_report_write_that_fails_leaves_the_old_file_whole(tmp_path):
    """report() wrote its CSV and PNG files in place (DataFrame.to_csv,
    savefig on the path): a full disk or an interrupt mid-write left half a
    file where the last report was.  They go through write_atomic now: the
    old file stays whole.  The failing write is a real one: the child runs
    under RLIMIT_FSIZE, so a write past the limit fails (EFBIG) as on a full
    disk -- first with a limit below the CSVs' size, then between the
    CSVs' and the PNGs'."""
    results = write_arms(tmp_path / "results", e1_like())
    out = tmp_path / "plots"
    hla.report(str(results), str(out))

    def contents():
        return {n: (out / n).read_bytes() for n in sorted(os.listdir(out))}
    before = contents()
    sizes = {n: len(b) for n, b in before.items()}
    csv_max = max(v for n, v in sizes.items() if n.endswith(".csv"))
    png_min = min(v for n, v in sizes.items() if n.endswith(".png"))
    assert csv_max < png_min, sizes
    for limit in (min(sizes.values()) // 2, (csv_max + png_min) // 2):
        p = subprocess.run([sys.executable, "-c", FULL_DISK, str(results), str(out), str(limit)],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 3 and "failed:" in p.stdout, (limit, p.stdout, p.stderr[-2000:])
        after = contents()
        for n in before:
            assert len(after[n]) == len(before[n]) and after[n] == before[n], \
                (limit, n, len(after[n]), len(before[n]))
        # and no temporary file is left behind (the report's marker says it is
        # incomplete, when the limit let it be written: INCOMPLETE-REPORT.txt)
        assert sorted(n for n in after if n != hla.INCOMPLETE_MARKER) == sorted(before), \
            sorted(after)


def test_report_bad_input_is_a_clear_error(tmp_path):
    p = run_cli("report", str(tmp_path / "missing"))
    assert p.returncode == 2 and "no such folder" in p.stderr
    p = run_cli("report", str(tmp_path))
    assert p.returncode == 2 and "no arm results" in p.stderr
    # (JSON but no arm: found by the library, after the imports -- the empty
    # folder above is refused before them)
    (tmp_path / "effects.json").write_text("{}")
    p = run_cli("report", str(tmp_path))
    assert p.returncode == 2 and "no arm results" in p.stderr, p.stderr
    p = run_cli("report")
    assert p.returncode == 2 and "results" in p.stderr


REPORT_IMPORTS = """
import sys
from heaplab.__main__ import main
rc = main(sys.argv[1:])
print(rc, 'pandas' in sys.modules, 'matplotlib' in sys.modules)
"""


def test_report_refuses_bad_arguments_before_it_imports_pandas(tmp_path):
    """heaplab report imported pandas and matplotlib (0.95 CPU s, session 44)
    before it found an empty results folder or an --out that is a file.
    Those are refused first now, in the library's words (hla.report's
    ValueError) -- and a good run still imports them and writes its files."""
    empty = tmp_path / "empty"
    empty.mkdir()
    only_run = tmp_path / "only_run"                   # a sweep's run folder below, no arm
    (only_run / "r1").mkdir(parents=True)
    (only_run / "r1" / "meta.json").write_text(json.dumps({"run_id": "r1", "grid": {}}))
    results = write_arms(tmp_path / "results", e1_like())
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    (results / "report").write_text("x")               # the default --out, a file
    for source, out in ((empty, None), (empty, a_file), (only_run, None), (results, a_file),
                        (results, "/dev/null"), (results, None)):
        with pytest.raises(ValueError) as e:
            hla.report(str(source), None if out is None else str(out))
        argv = ["report", str(source)] + ([] if out is None else ["--out", str(out)])
        p = subprocess.run([sys.executable, "-c", REPORT_IMPORTS, *argv], capture_output=True,
                           text=True, timeout=120)
        assert p.stdout == "2 False False\n", (argv, p.stdout, p.stderr)
        assert p.stderr == f"heaplab report: {e.value}\n", (argv, p.stderr)
    out = tmp_path / "plots"
    p = subprocess.run([sys.executable, "-c", REPORT_IMPORTS, "report", str(results), "--out",
                        str(out)], capture_output=True, text=True, timeout=120)
    assert p.stdout.endswith("0 True True\n") and "E1_footprint.png" in os.listdir(out), \
        (p.stdout, p.stderr)


def test_unclear_calls_are_clear_errors(tmp_path):
    """Public calls that gave an empty table, a bare KeyError / TypeError /
    IndexError, a numpy reshape error or matplotlib's own error now raise
    ValueError naming what was wrong (and the file, for results on disk)."""
    e1 = e1_like()
    with pytest.raises(ValueError, match=r"no figure\(s\) \['phys_aftr'\]"):
        hla.wide(e1, figures=["phys_aftr"])
    # figures=[] is refused as plot_phase_cost's and plot_vmas' are (docs/analysis.md,
    # Sources): it was an empty table, shape (0, 0), without a word
    for empty in ([], ()):
        with pytest.raises(ValueError, match=r"figures=\[\]: name at least one figure"):
            hla.wide(e1, figures=empty)
        with pytest.raises(ValueError, match=r"figures=\[\]"):
            hla.wide(hla.records_frame(e1), figures=empty)
    t = hla.wide(e1, figures="phys_after")                     # a name, as plot_phase_cost
    assert list(t.columns) == ["phys_after"] and len(t) == 6
    with pytest.raises(ValueError, match=r"arms=\[\]"):
        hla.plot_footprint(e1, arms=[])
    assert len(hla.plot_footprint(e1, arms="on").axes) == 1   # one name
    with pytest.raises(ValueError, match=r"figures=\[\]"):
        hla.plot_phase_cost(e1, figures=[])
    with pytest.raises(ValueError, match=r"phases=\[\]"):
        hla.plot_phase_cost(e1, phases=[])
    with pytest.raises(ValueError, match=r"figures=\[\]"):
        hla.plot_vmas(e5_like(), figures=[])
    a = arm("E1", "on", [phase("E1", "on", "fill", 0, 0.0, 0.1)])
    del a["experiment"]
    with pytest.raises(ValueError, match="arm 'on': .*no 'experiment'"):
        hla.records_frame(a)
    three = arm("E1", "on", [phase("E1", "on", "fill", 0, 0.0, 0.1)], series=[[0.0, 1, 2]] * 4)
    with pytest.raises(ValueError, match=r"arm 'on': .*series row 0 .* expected 4 numbers"):
        hla.plot_footprint(three)
    folder = tmp_path / "res" / "E1"
    folder.mkdir(parents=True)
    (folder / "on.json").write_text(json.dumps({"experiment": "E1", "arm": "on",
                                                "records": None}))
    with pytest.raises(ValueError, match=f"{folder / 'on.json'}: .*'records' is null"):
        hla.records_frame(str(tmp_path / "res"))
    with pytest.raises(ValueError, match=f"{folder / 'on.json'}: .*'records' is null"):
        hla.records_frame(str(folder / "on.json"))
    (folder / "on.json").write_text(json.dumps(three))
    with pytest.raises(ValueError, match=f"{folder / 'on.json'}: .*series row 0"):
        hla.plot_footprint(str(tmp_path / "res"))
    # a phase record's own fields of the wrong type: an AttributeError ("stats"
    # a list) or a TypeError/UFuncTypeError from inside a plot, no file named
    for field, value, needle in [("stats", [1, 2], "'stats' is list, expected an object"),
                                 ("t_start_s", "0", "'t_start_s' is '0', expected a number"),
                                 ("phys_peak", True, "'phys_peak' is True, expected a number")]:
        a = arm("E1", "on", [phase("E1", "on", "fill", 0, 0.0, 0.1)], series=[[0.0, 1, 2, 0]])
        a["records"][0][field] = value
        (folder / "on.json").write_text(json.dumps(a))
        for fn in (hla.records_frame, hla.series_frame, hla.plot_footprint):
            with pytest.raises(ValueError, match=f"{folder / 'on.json'}: .*record 0 \\(phase "
                                                 f"'fill'\\): {re.escape(needle)}"):
                fn(str(tmp_path / "res"))


def test_report_checks_the_source_before_it_makes_the_output(tmp_path):
    """report() made <missing>/report, then said 'no arm results in this
    folder'; refused records left an empty output folder; --out that is a
    file was a FileExistsError traceback from the CLI."""
    missing = tmp_path / "no_such_results"
    with pytest.raises(ValueError, match="no such file or folder"):
        hla.report(str(missing))
    assert not missing.exists()
    results = tmp_path / "results" / "E1"
    results.mkdir(parents=True)
    bad = arm("E1", "on", [phase("E1", "on", "fill", 0, 0.0, 0.1)], error="boom")
    (results / "on.json").write_text(json.dumps(bad))
    out = tmp_path / "plots"
    with pytest.raises(ValueError, match="failed phases or arms"):
        hla.report(str(tmp_path / "results"), str(out))
    assert not out.exists()
    p = run_cli("report", str(tmp_path / "results"), "--out", str(out))
    assert p.returncode == 2 and "failed" in p.stderr and not out.exists(), p.stderr
    (results / "on.json").write_text(json.dumps(e1_like()[1]))
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for where in (str(a_file), "/dev/null"):
        with pytest.raises(ValueError, match="not a folder"):
            hla.report(str(tmp_path / "results"), where)
        p = run_cli("report", str(tmp_path / "results"), "--out", where)
        assert p.returncode == 2 and p.stderr == f"heaplab report: {where}: not a folder " \
            "(the report's output folder)\n", p.stderr
    (results / "z.json").write_text('{"experiment": "E1", "arm": "z", "records": null}')
    p = run_cli("report", str(tmp_path / "results"), "--out", str(out))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert f"{results / 'z.json'}: not an arm's results: 'records' is null" in p.stderr


def test_core_package_does_not_need_pandas():
    code = ("import sys, heaplab, heaplab.harness, heaplab.notebooks; "
            "assert 'pandas' not in sys.modules and 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# ---- the notebook runner ---------------------------------------------------------------

def notebook(path, *cells, outputs=False):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook, new_output
    nb = new_notebook(cells=[new_code_cell(c) for c in cells],
                      metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                               "language": "python"}})
    if outputs:
        nb.cells[0].outputs = [new_output("stream", name="stdout", text="stale\n")]
        nb.cells[0].execution_count = 1
    for i, c in enumerate(nb.cells):
        c["id"] = f"c{i}"
    nbformat.write(nb, str(path))


FIGURE_CELL = ("%matplotlib inline\nimport heaplab.analysis as hla\n"
               "from matplotlib.figure import Figure\n"
               "fig = Figure(figsize=(2, 2)); fig.add_subplot().plot([0, 1], [1, 0]); fig")


def run_runner(*args):
    return subprocess.run([sys.executable, "-m", "heaplab.notebooks", *args],
                          capture_output=True, text=True, timeout=300)


def test_notebook_runner_check_fails_on_a_broken_notebook(tmp_path):
    notebook(tmp_path / "a_good.ipynb", FIGURE_CELL)
    notebook(tmp_path / "b_broken.ipynb", "x = 1", "raise RuntimeError('experiment moved')",
             "print('never')", outputs=True)
    p = run_runner(str(tmp_path), "--check")
    assert p.returncode == 1, p.stdout + p.stderr
    lines = p.stdout
    assert "ok   " + str(tmp_path / "a_good.ipynb") in lines
    assert "FAIL " + str(tmp_path / "b_broken.ipynb") in lines
    assert "cell 1: RuntimeError: experiment moved" in lines
    assert "displayed no figure" in lines and "carries outputs" in lines
    assert "1 of 2 notebooks ran" in lines
    build = tmp_path / "_build"
    assert (build / "a_good.ipynb").exists() and (build / "b_broken.ipynb").exists()
    pngs = os.listdir(build / "a_good")
    assert len(pngs) == 1 and pngs[0].endswith(".png")
    import nbformat
    done = nbformat.read(str(build / "b_broken.ipynb"), as_version=4)
    assert done.cells[2].outputs == []                  # it stopped at the error
    # --strip clears the committed outputs (nothing runs); a second strip has nothing to do
    p = run_runner("--strip", str(tmp_path / "b_broken.ipynb"))
    assert p.returncode == 0 and "stripped" in p.stdout
    assert nbformat.read(str(tmp_path / "b_broken.ipynb"), as_version=4).cells[0].outputs == []
    p = run_runner("--strip", str(tmp_path / "b_broken.ipynb"))
    assert "clean" in p.stdout


def test_notebook_runner_reports_a_skipped_notebook(tmp_path):
    """A notebook that calls skip() (E9 on a machine without redis-server)
    is reported as skipped with its reason, not as a failure, and --check
    asks it for no figure; the cells after skip() do not run."""
    notebook(tmp_path / "a_good.ipynb", FIGURE_CELL)
    notebook(tmp_path / "b_skip.ipynb", "from heaplab.notebooks import skip\n"
             "skip('redis-server not installed here')", "raise RuntimeError('ran on')")
    p = run_runner(str(tmp_path), "--check")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "skip " + str(tmp_path / "b_skip.ipynb") in p.stdout
    assert "skipped: redis-server not installed here" in p.stdout
    assert "FAIL" not in p.stdout and "displayed no figure" not in p.stdout
    assert "1 of 2 notebooks ran, 1 skipped" in p.stdout
    import nbformat
    done = nbformat.read(str(tmp_path / "_build" / "b_skip.ipynb"), as_version=4)
    assert done.cells[1].outputs == []                  # stopped at skip()
    # a skipped notebook committed with outputs still fails --check
    notebook(tmp_path / "b_skip.ipynb", "from heaplab.notebooks import skip\nskip('no')",
             outputs=True)
    p = run_runner(str(tmp_path), "--check")
    assert p.returncode == 1 and "carries outputs" in p.stdout, p.stdout
    assert "1 of 2 notebooks ran" in p.stdout and "skipped" in p.stdout


def test_notebook_runner_bad_input(tmp_path):
    p = run_runner(str(tmp_path / "nothing.ipynb"))
    # (a mistyped path was "not a notebook (.ipynb) or a folder of notebooks")
    assert p.returncode == 2 and "nothing.ipynb: no such file or folder" in p.stderr, p.stderr
    (tmp_path / "notes.txt").write_text("x")
    p = run_runner(str(tmp_path / "notes.txt"))
    assert p.returncode == 2 and "not a notebook" in p.stderr, p.stderr
    (tmp_path / "notes.txt").unlink()
    p = run_runner(str(tmp_path))
    assert p.returncode == 2 and "no notebooks" in p.stderr
    p = run_runner(str(tmp_path), "--timeout", "0")
    assert p.returncode == 2 and "--timeout" in p.stderr
    # JSON that is not a notebook stopped the whole run with a jsonschema
    # (or AttributeError) traceback: the notebooks after it never ran
    (tmp_path / "a_bad.ipynb").write_text("{}")
    (tmp_path / "b_list.ipynb").write_text("[]")
    notebook(tmp_path / "c_good.ipynb", "x = 1")
    p = run_runner(str(tmp_path))
    assert p.returncode == 1 and "Traceback" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert f"FAIL {tmp_path / 'a_bad.ipynb'}  not a notebook nbformat can read: " in p.stdout
    assert f"FAIL {tmp_path / 'b_list.ipynb'}  not a notebook nbformat can read: " in p.stdout
    assert f"ok   {tmp_path / 'c_good.ipynb'}" in p.stdout, p.stdout
    # --out that is a file: a FileExistsError traceback from os.makedirs
    p = run_runner(str(tmp_path / "c_good.ipynb"), "--out", "/dev/null")
    assert p.returncode == 2 and p.stderr == "heaplab.notebooks: --out /dev/null: not a " \
        "folder\n", p.stderr
    with pytest.raises(FileNotFoundError, match="expected one"):
        experiment_module("e99", start=HERE)
    with pytest.raises(FileNotFoundError, match="no such experiment file"):
        experiment_module(str(tmp_path / "nope.py"))



def test_notebook_parameters_cell_is_overridden(tmp_path):
    """--param NAME=VALUE injects a cell after the one tagged `parameters`
    (papermill's convention); a name the cell does not set is an error."""
    import nbformat
    path = tmp_path / "p.ipynb"
    notebook(path, "SIZE_MIB = 96\nLABEL = 'small'", "assert (SIZE_MIB, LABEL) == (192, 'big')",
             FIGURE_CELL)
    nb = nbformat.read(str(path), as_version=4)
    nb.cells[0].metadata["tags"] = ["parameters"]
    nbformat.write(nb, str(path))
    p = run_runner(str(path), "--out", str(tmp_path / "out"), "-p", "SIZE_MIB=192",
                   "-p", "LABEL=big", "--check")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "WARNING" not in p.stderr, p.stderr          # no kernel warning (TCP) either
    p = run_runner(str(path), "--out", str(tmp_path / "out"), "--check")
    assert p.returncode == 1 and "AssertionError" in p.stdout, p.stdout
    p = run_runner(str(path), "--out", str(tmp_path / "out"), "-p", "NOPE=1")
    assert p.returncode == 1 and "['NOPE'] are not set in the parameters cell" in p.stdout


def test_notebook_check_fails_on_printed_warnings(tmp_path):
    path = tmp_path / "w.ipynb"
    notebook(path, "import warnings\nwarnings.warn('stale API')", FIGURE_CELL)
    p = run_runner(str(path), "--out", str(tmp_path / "out"), "--check")
    assert p.returncode == 1 and "printed warnings" in p.stdout and "stale API" in p.stdout, p.stdout


def test_notebook_check_fails_on_a_cell_past_its_timeout(tmp_path):
    """A cell that runs past --timeout is stopped and the notebook FAILs,
    its figure shown before it notwithstanding.  No cell ever timed out:
    nbclient 0.11, given a blocking KernelManager, waited for the cell's
    reply past its timeout, and this notebook was "ok" after 21 s (the
    mutation audit of session 37)."""
    path = tmp_path / "t.ipynb"
    notebook(path, FIGURE_CELL, "import time\ntime.sleep(20)", "print('never')")
    p = run_runner(str(path), "--out", str(tmp_path / "out"), "--check", "--timeout", "2")
    assert p.returncode == 1, p.stdout + p.stderr
    assert f"FAIL {path}" in p.stdout and "a cell ran longer than 2.0 s" in p.stdout, p.stdout


def test_the_tidy_frame_tells_repeats_apart():
    """records_frame (and report's <exp>_records.csv) had one row per repeat
    and no column to tell them apart: a repeat column, k of <arm>.r<k>.json."""
    runs = []
    for k, phys in ((0, (10, 20)), (1, (10, 30))):
        a = arm("E1", "on", [phase("E1", "on", "fill", 0, 0.0, 1.0, phys=phys)])
        a["repeat"] = k
        runs.append(a)
    once = arm("E1", "off", [phase("E1", "off", "fill", 0, 0.0, 1.0)])
    df = hla.records_frame(runs + [once])
    after = df[df["figure"] == "phys_after"].set_index(["arm", "repeat"])["value"]
    assert after[("on", 0)] == 20 * MiB and after[("on", 1)] == 30 * MiB, after
    assert df[df["arm"] == "off"]["repeat"].isna().all()
