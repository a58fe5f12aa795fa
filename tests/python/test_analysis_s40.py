"""The analysis side's leftovers of session 39's hunt (session 40): the
same treatment of non-finite figures on every path into the tables, the
incomplete-report marker's edges, `heaplab compare` on Ctrl-C.  The folders
are written by hand: no arm runs here."""
import glob
import json
import os
import types
import warnings

import pytest

from heaplab import analysis as hla
from heaplab.__main__ import main
from test_analysis_s39 import _arm, _results
from test_compare_grids import make_run

pytestmark = pytest.mark.shares_the_machine

MiB = 1 << 20


def _with_figures(run):
    """make_run's task records given the figures a run report plots."""
    for path in glob.glob(os.path.join(run, "E1", "*", "*.json")):
        with open(path) as f:
            d = json.load(f)
        d["records"][0].update(phys_before=8 * MiB, phys_after=20 * MiB, duration_s=0.1)
        with open(path, "w") as f:
            json.dump(d, f)
    return run


# ---- non-finite figures: one treatment on every path into the tables ----------------------

def test_a_non_finite_figure_given_as_a_dict_or_arm_result_is_named(tmp_path):
    """An Infinity was named only for an arm read from a file: the same arm
    given as a dict (or an ArmResult, a list) became a blank cell without a
    word.  And a NaN figure or stat (the harness writes null for a figure a
    phase does not have; a counter is never NaN) was blanked without a word
    everywhere.  Now each is named, whichever way the arm comes in, once
    per call; a NaN note (it may mean "no value") is still not."""
    on = _arm("E1", "on", 20)
    r = on["records"][0]
    r["phys_after"] = float("inf")
    r["stats"] = {"cycles": float("nan"), "pages": 3}
    r["notes"] = {"spare_mib": float("nan"), "rate_mib_s": float("-inf")}
    said = ("an arm given in Python (E1/on): 3 figure(s) not a finite number -- record 0 "
            "(phase 'p'): phys_after = inf; record 0 (phase 'p'): stats.cycles = nan; record 0 "
            "(phase 'p'): notes.rate_mib_s = -inf: not a measurement, left out of the tables "
            "(a blank cell)")
    for source in (on, [on], types.SimpleNamespace(data=on, repeats=[])):
        with warnings.catch_warnings(record=True) as got:
            warnings.simplefilter("always")
            df = hla.records_frame(source)
        assert [str(w.message) for w in got] == ["heaplab: " + said], [str(w.message)
                                                                       for w in got]
        # attributed to this line, not to heaplab's wrapper or a frame inside it
        assert got[0].filename == __file__, (got[0].filename, got[0].lineno)
        assert set(df["figure"]) == {"phys_before", "duration_s", "stats.pages"}, df
    # one warning for a whole plot (it reads the arms three times)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        hla.plot_phase_cost([on, _arm("E1", "off", 40)], figures="duration_s")
    assert len(got) == 1, [str(w.message) for w in got]
    # a NaN note alone: no word, no row
    off = _arm("E1", "off", 40)
    off["records"][0]["notes"] = {"spare_mib": float("nan")}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        df = hla.records_frame(off)
    assert "notes.spare_mib" not in set(df["figure"])
    # from a file: the file named, once (the file read, then its dict)
    res = _results(tmp_path / "res", on)
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        hla.records_frame(str(res / "E1" / "on.json"))
    assert [str(w.message) for w in got] == [
        "heaplab: " + said.replace("an arm given in Python", str(res / "E1" / "on.json"))]


def test_a_sweep_task_records_non_finite_figure_or_effect_is_named_and_blank(tmp_path, capsys):
    """A sweep's task record was not checked at all: an Infinity phys_after
    was sweep.csv's "inf", an Infinity effect the cell's median (inf, its
    spread NaN) in effect_summary, compare and the run's plots.  Now the
    task record is named (once per file, in the report and compare too),
    the figure is a blank cell and the effect has no row, as records_frame
    has none."""
    run = _with_figures(make_run(tmp_path / "a", {"warm_pages": ["0", "64"]},
                                 lambda v: 10.0 if v["warm_pages"] == "0" else 20.0))
    other = make_run(tmp_path / "b", {"warm_pages": ["0", "64"]}, lambda v: 11.0)
    rec = tmp_path / "a" / "E1" / "c000" / "on.r1.json"
    d = json.loads(rec.read_text())
    d["records"][0]["phys_after"] = float("inf")
    d["effects_numeric"][0]["value"] = float("nan")
    rec.write_text(json.dumps(d))
    with pytest.warns(UserWarning, match=r"c000/on\.r1\.json \(E1/on cell c000\): 2 figure\(s\) "
                                         r"not a finite number -- record 0 \(phase 'p'\): "
                                         r"phys_after = inf; effect 'x' = nan: not a "
                                         r"measurement"):
        sw = hla.sweep_frame(run)
    assert sw["phys_after"].isna().sum() == 1 and not (sw["phys_after"] == float("inf")).any()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        s = hla.effect_summary(run)
    c0 = s[s["cell"] == "c000"].iloc[0]
    assert (c0["median"], c0["n"], c0["spread"]) == (10.0, 1, 0.0), s
    assert main(["report", run]) == 0
    out, err = capsys.readouterr()
    assert err.count("heaplab report: warning: ") == 1, err
    assert "c000/on.r1.json (E1/on cell c000): 2 figure(s) not a finite number" in err, err
    assert "inf" not in (tmp_path / "a" / "report" / "sweep.csv").read_text()
    assert main(["compare", run, other]) == 0
    err = capsys.readouterr().err
    assert err.count("heaplab compare: warning: ") == 1, err
    assert "c000/on.r1.json (E1/on cell c000): 2 figure(s) not a finite number" in err, err


# ---- the incomplete-report marker's edges --------------------------------------------------

def _stop_at_fsync(monkeypatch, n, exc=KeyboardInterrupt):
    """The n-th fsync of write_atomic raises exc (Ctrl-C or a full disk there)."""
    from heaplab import harness
    real, calls = harness.os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == n:
            raise exc
        real(fd)
    monkeypatch.setattr(harness.os, "fsync", fsync)
    return lambda: monkeypatch.setattr(harness.os, "fsync", real)


def test_a_report_stopped_before_its_first_file_leaves_no_marker(tmp_path, monkeypatch,
                                                                  capsys):
    """The marker was written before the report's first plot was drawn: a
    Ctrl-C there (the plots take most of a report's time) left
    INCOMPLETE-REPORT.txt beside the complete earlier report, whose files
    were all whole and untouched -- the folder called incomplete for
    nothing.  Now the marker comes with the first file written."""
    res = _results(tmp_path / "res", _arm("E1", "on", 20), _arm("E1", "off", 40))
    assert main(["report", str(res)]) == 0
    before = {n: (res / "report" / n).read_bytes() for n in os.listdir(res / "report")}
    capsys.readouterr()

    def stop(*a, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(hla, "records_frame", stop)
    assert main(["report", str(res)]) == 130
    assert "no file of the report written" in capsys.readouterr().err
    after = {n: (res / "report" / n).read_bytes() for n in os.listdir(res / "report")}
    assert after == before, sorted(after)


def test_the_markers_command_carries_the_options_given(tmp_path, monkeypatch, capsys):
    """The marker's "run again" line said `heaplab report SRC --out OUT`
    whatever the report was given: run as written after `--dpi 200
    --failed flag`, it refused the failed arm the first report kept (exit
    2) or wrote the plots at another resolution.  Now it gives them (a path
    with a space quoted, as a shell takes it)."""
    on = _arm("E1", "on", 20, error="RuntimeError: boom")
    res = _results(tmp_path / "my res", on, _arm("E1", "off", 40))
    out = tmp_path / "out"
    _stop_at_fsync(monkeypatch, 3)
    assert main(["report", str(res), "--out", str(out), "--dpi", "200",
                 "--failed", "flag"]) == 130
    capsys.readouterr()
    text = (out / hla.INCOMPLETE_MARKER).read_text()
    assert (f"Run `python3 -m heaplab report '{res}' --out {out} --dpi 200 --failed flag` "
            f"again") in text, text
    run = make_run(tmp_path / "run", {"warm_pages": ["0", "64"]}, lambda v: 1.0)
    _stop_at_fsync(monkeypatch, 2)
    assert main(["report", run, "--dpi", "90"]) == 130
    text = (tmp_path / "run" / "report" / hla.INCOMPLETE_MARKER).read_text()
    assert f"Run `python3 -m heaplab report {run} --out {run}/report --dpi 90` again" in text


def test_two_reports_into_one_folder_each_take_out_only_their_own_marker(tmp_path, capsys):
    """Two reports writing into one folder at once: the first to finish
    removed the marker while the other was still writing -- killed then,
    it left its files beside the first's and no word in the folder; and
    neither said the other was there.  Now each report has its own entry
    in the marker and takes out only its own (and those of reports no
    longer running); a report starting beside one still running says so."""
    res = _results(tmp_path / "res", _arm("E1", "on", 20), _arm("E1", "off", 40))
    out = res / "report"
    os.makedirs(out)
    # a report still writing there (an entry of a live process: our parent), and one
    # that was killed (no such process), as the marker holds them
    def entry(src, pid, tag):
        return (f"This report is incomplete: `heaplab report` of {src} into this folder, "
                f"started 2026-12-07 08:00:00 UTC (pid {pid}), did not finish -- ...\n"
                f"(report {pid}-{tag})\n")
    (out / hla.INCOMPLETE_MARKER).write_text(entry("/elsewhere/results", os.getppid(), "0a0b")
                                             + "\n" + entry("/old/results", 999999999, "0c0d"))
    assert main(["report", str(res)]) == 0
    said = capsys.readouterr().out
    assert (f"{out}: another report is writing into this folder now (pid {os.getppid()}: "
            f"`heaplab report` of /elsewhere/results): the files here will be a mix of both "
            f"reports; let it finish, or report into another --out") in said, said
    assert f"{out}: an earlier report here did not complete" in said, said
    # its own entry and the killed one's gone, the running one's kept
    assert (out / hla.INCOMPLETE_MARKER).read_text() == entry("/elsewhere/results",
                                                              os.getppid(), "0a0b")


# ---- heaplab compare on Ctrl-C ----------------------------------------------------------------

def test_compare_interrupted_says_so(tmp_path, monkeypatch, capsys):
    """`heaplab compare` stopped by Ctrl-C exited 130 without a word, where
    `report` says `heaplab report: interrupted; ...` and `run`
    `interrupted: heaplab run --resume RUN`.  Now one line, as theirs."""
    a = make_run(tmp_path / "a", {"warm_pages": ["0", "64"]}, lambda v: 1.0)
    b = make_run(tmp_path / "b", {"warm_pages": ["0", "64"]}, lambda v: 2.0)

    def stop(*args, **kw):
        raise KeyboardInterrupt
    monkeypatch.setattr(hla, "compare_runs", stop)
    assert main(["compare", a, b]) == 130
    out, err = capsys.readouterr()
    assert (out, err) == ("", "heaplab compare: interrupted\n"), (out, err)


# ---- the hostile pass: unusual but legal inputs ---------------------------------------------

def test_an_arm_that_recorded_no_phase_is_named_by_the_report(tmp_path, capsys):
    """An arm that ran and recorded no phase, without an error (a
    --command arm printing records [], an arm that returned early), had no
    row in E1_records.csv or E1_phases.csv and no bar, and the report said
    nothing of it, exit 0: the tables of on and off read as the whole
    experiment.  (An arm that *failed* with no record is refused or flagged:
    no_records_failure.)  Now a line names it."""
    empty = _arm("E1", "early", 0)
    empty["records"] = []
    res = _results(tmp_path / "res", _arm("E1", "on", 20), _arm("E1", "off", 40), empty)
    assert main(["report", str(res)]) == 0
    out = capsys.readouterr().out
    assert ("E1/early: no phase record (the arm recorded no phase): no row in the tables, "
            "no bar\n") in out, out
    assert "early" not in (res / "report" / "E1_phases.csv").read_text()


def test_a_big_sweeps_effect_plots_stay_legible(tmp_path):
    """A 50 x 20 grid (10,000 rows of sweep.csv): plot_effect drew one
    arm's 20 lines in one colour with 7 markers in turn -- legend entries
    1, 8 and 15 looked the same -- and plot_effect_heatmap wrote 1,000
    "median (min–max)" texts on a 7-inch figure, one smear of overlapping
    digits (its 50 tick labels too).  Now one arm's lines get a colour each,
    and the heat map is as wide as its cells' texts need, up to
    HEATMAP_MAX_WIDTH inches; beyond, it writes no value and says where
    they are."""
    run = make_run(tmp_path / "a", {"warm_pages": [str(i) for i in range(50)],
                                    "release_per_sweep": [str(1 + j) for j in range(10)]},
                   lambda v: int(v["warm_pages"]) / 50 + int(v["release_per_sweep"]) / 100,
                   unit="fraction")
    fig = hla.plot_effect(run, "x")
    lines = [c.lines[0] for c in fig.axes[0].containers]      # (one errorbar per line)
    styles = {(str(ln.get_color()), ln.get_marker()) for ln in lines}
    assert len(lines) == 10 and len(styles) == 10, styles
    fig = hla.plot_effect_heatmap(run, "x", "on")
    ax = fig.axes[0]
    assert fig.get_figwidth() == hla.HEATMAP_MAX_WIDTH and not ax.texts, len(ax.texts)
    assert ("50 columns: too many to write each cell's value on it; the values are in "
            "effect_summary") in fig._suptitle.get_text()
    # fewer columns: a figure wide enough for the texts, every cell written
    small = make_run(tmp_path / "b", {"warm_pages": [str(i) for i in range(8)],
                                      "release_per_sweep": ["1", "2"]},
                     lambda v: int(v["warm_pages"]) / 50, unit="fraction")
    fig = hla.plot_effect_heatmap(small, "x", "on")
    longest = max(len(line) for t in fig.axes[0].texts for line in t.get_text().split("\n"))
    assert len(fig.axes[0].texts) == 16
    assert fig.get_figwidth() >= 8 * longest * 0.07, (fig.get_figwidth(), longest)


def test_a_runs_failed_tasks_are_said_by_its_report_and_compare(tmp_path, capsys):
    """A sweep whose tasks failed -- here every one -- was reported as its
    three tables, exit 0, nothing said (the suite's report refuses failed
    arms by default), and compare against it said only "the two runs have
    no effect in common".  Failed tasks' effects are no part of the medians;
    now both say how many tasks failed, which, and how to run them again."""
    run = _with_figures(make_run(tmp_path / "a", {"warm_pages": ["0", "64"]}, lambda v: 1.0))
    for path in glob.glob(os.path.join(run, "E1", "*", "*.json")):
        with open(path) as f:
            d = json.load(f)
        d["sweep"].update(status="failed", error="RuntimeError: boom")
        with open(path, "w") as f:
            json.dump(d, f)
    other = _with_figures(make_run(tmp_path / "b", {"warm_pages": ["0", "64"]}, lambda v: 2.0))
    said = (f"4 of 4 task(s) failed (E1 cell c000 on r0, E1 cell c000 on r1, E1 cell c001 on "
            f"r0, E1 cell c001 on r1): their effects are no part of the medians (sweep.csv's "
            f"status and error say why; heaplab run --resume {run} runs them again)")
    assert main(["report", run]) == 0
    assert f"a: {said}\n" in capsys.readouterr().out
    assert main(["compare", run, other]) == 2
    err = capsys.readouterr().err
    assert err == (f"heaplab compare: warning: run A ({run}): {said}\nheaplab compare: the two "
                   f"runs have no effect in common (same experiment, arm and option values)\n"), err
