"""heaplab.analysis and `python -m heaplab report`, session 32's hunt: a copy
of an experiment folder below the results folder, an arm that failed with
no records, the report's figures and its command line.  Synthetic records:
fast, and no assertion depends on the machine's load."""
import json
import os
import re
import subprocess
import sys
import warnings

import pytest

from heaplab import analysis as hla
from heaplab.harness import write_csv

pytestmark = pytest.mark.shares_the_machine

MiB = 1 << 20


def _arm(experiment, arm, after_mib, repeat=None, **extra):
    a = {"experiment": experiment, "title": "t", "arm": arm, "options": {}, "params": {},
         "error": None, "notes": {}, "series": [],
         "records": [{"experiment": experiment, "arm": arm, "phase": "p", "index": 0,
                      "phys_before": 8 * MiB, "phys_after": after_mib * MiB,
                      "duration_s": 0.1}]}
    if repeat is not None:
        a["repeat"] = repeat
    a.update(extra)
    return a


def _report(*args):
    return subprocess.run([sys.executable, "-m", "heaplab", "report", *args],
                          capture_output=True, text=True, timeout=300)


# ---- 1: a copy of an experiment folder below the results folder -------------------------

def test_a_copied_experiment_folder_is_named_not_mixed_in_silently(tmp_path):
    """results/XR and a copy of an older XR as results/XR-before: the copy's
    three repeats were read as three more repeats of XR's arm (phys_after the
    median of 3 x 44 and 3 x 144 MiB) without a word -- the duplicate check
    (experiment, arm, repeat) was made per folder.  It spans the walk now:
    the copy is named, as `on (1).json` beside `on.json` is."""
    for folder, after in (("XR", 44), ("XR-before", 144)):
        (tmp_path / folder).mkdir()
        for k in range(3):
            (tmp_path / folder / f"a.r{k}.json").write_text(
                json.dumps(_arm("XR", "a", after, repeat=k)))
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        hla.records_frame(str(tmp_path))
    said = [str(w.message) for w in got]
    for k in range(3):
        assert any(re.search(rf"XR-before/a\.r{k}\.json and .*XR/a\.r{k}\.json are both "
                             rf"experiment XR arm 'a' repeat {k}: a copy of the arm in another "
                             rf"folder", m) for m in said), said
    p = _report(str(tmp_path), "--out", str(tmp_path / "rep"))
    assert "XR-before/a.r0.json" in p.stderr and "a copy of the arm" in p.stderr, p.stderr
    # one folder's arms, each once: no warning
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hla.records_frame(str(tmp_path / "XR"))
        write_csv(str(tmp_path / "XR"))


# ---- 8: an arm that failed with no phase record --------------------------------------------

def test_an_arm_that_failed_with_no_records_is_refused_or_listed_never_dropped(tmp_path):
    """An arm whose command exited before any phase recorded (error set,
    records []) vanished from records.csv, records_frame and `heaplab
    report` (exit 0, the table short of the arm) -- docs/harness.md: a table
    is never silently short of an arm.  failed='raise' refuses it, 'flag'
    gives it a row (and the report names it), records.csv has its row."""
    import csv
    xf = tmp_path / "XF"
    xf.mkdir()
    (xf / "ok.json").write_text(json.dumps(_arm("XF", "ok", 10)))
    gone = _arm("XF", "gone", 0, error="XF/gone: exit 0, no arm JSON on stdout")
    gone["records"] = []
    (xf / "gone.json").write_text(json.dumps(gone))
    with pytest.raises(ValueError, match=r"XF/gone: arm failed: XF/gone: exit 0, no arm JSON "
                                         r"on stdout \(no phase records\)"):
        hla.records_frame(str(tmp_path))
    df = hla.records_frame(str(tmp_path), failed="flag")
    row = df[df["arm"] == "gone"]
    assert len(row) == 1 and row["status"].iloc[0].startswith("arm failed: XF/gone") and \
        row["phase"].iloc[0] == "", df
    assert set(hla.records_frame(str(tmp_path), failed="drop")["arm"]) == {"ok"}
    write_csv(str(xf))
    rows = list(csv.DictReader(open(xf / "records.csv")))
    assert [(r["arm"], r["phase"], r["status"]) for r in rows if r["arm"] == "gone"] == \
        [("gone", "", "no phase records")], rows
    assert [r["arm_error"] for r in rows if r["arm"] == "gone"] == \
        ["XF/gone: exit 0, no arm JSON on stdout"]
    p = _report(str(tmp_path), "--out", str(tmp_path / "rep"))
    assert p.returncode == 2 and "XF/gone: arm failed" in p.stderr, (p.returncode, p.stderr)
    p = _report(str(tmp_path), "--out", str(tmp_path / "rep"), "--failed", "flag")
    assert p.returncode == 0 and "XF/gone: arm failed: XF/gone: exit 0" in p.stdout + p.stderr, \
        (p.stdout, p.stderr)
    assert "gone" in (tmp_path / "rep" / "XF_records.csv").read_text()


# ---- 14: the VMA plot's legend, its layout warning; a file for the folder ------------------

def test_a_vma_plot_of_many_arms_keeps_its_legend_off_the_plot_and_quiet(tmp_path):
    """E10's 40 arms: the legend inside the axes covered the plot and ran off
    the figure, and matplotlib's "constrained_layout not applied" warning was
    printed among heaplab report's lines.  `heaplab report FILE` said "no such
    folder"."""
    e = tmp_path / "EV"
    e.mkdir()
    for i in range(40):
        a = _arm("EV", f"arm{i:02d}", 10)
        a["records"] = [dict(a["records"][0], phase=ph, index=k, vmas_after=1 + (i + k) % 3)
                        for k, ph in enumerate(("fill", "thin", "drop"))]
        (e / f"arm{i:02d}.json").write_text(json.dumps(a))
    fig = hla.plot_vmas(str(tmp_path))
    ax = fig.axes[0]
    assert ax.get_legend() is None and len(fig.legends) == 1, "the legend is the figure's"
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    FigureCanvasAgg(fig).draw()         # (the layout applied)
    box = fig.legends[0].get_window_extent()
    assert box.x0 >= ax.get_window_extent().x1, "the legend is right of the axes"
    assert box.x1 <= fig.bbox.x1 + 1 and box.y0 >= -1, "the legend is inside the figure"
    p = _report(str(tmp_path), "--out", str(tmp_path / "rep"))
    assert p.returncode == 0 and "constrained_layout" not in p.stderr, p.stderr
    assert (tmp_path / "rep" / "EV_vmas.png").exists()
    p = _report(str(e / "arm00.json"))
    assert p.returncode == 2 and "arm00.json: not a folder" in p.stderr, p.stderr
