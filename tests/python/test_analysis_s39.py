"""The analysis side under hostile and newcomer use (session 39's hunt):
`heaplab compare` and `heaplab report` given wrong input, interrupted or
short of disk.  The folders are written by hand: no arm runs here."""
import json
import os
import subprocess
import sys
import time
import warnings

import pytest

from heaplab import analysis as hla
from heaplab.__main__ import main
from test_compare_grids import make_run

pytestmark = pytest.mark.shares_the_machine

MiB = 1 << 20


def _arm(experiment, arm, after_mib, **extra):
    a = {"experiment": experiment, "title": "t", "arm": arm, "options": {}, "params": {},
         "error": None, "notes": {}, "series": [],
         "records": [{"experiment": experiment, "arm": arm, "phase": "p", "index": 0,
                      "phys_before": 8 * MiB, "phys_after": after_mib * MiB,
                      "duration_s": 0.1}]}
    a.update(extra)
    return a


def _results(folder, *arms):
    """A results folder holding the arm dicts as <experiment>/<arm>.json."""
    for a in arms:
        os.makedirs(folder / a["experiment"], exist_ok=True)
        (folder / a["experiment"] / f"{a['arm']}.json").write_text(json.dumps(a))
    return folder


# ---- compare: its arguments checked before pandas, one run given twice ---------------------

def test_compare_checks_its_run_folders_before_importing_pandas(tmp_path):
    """A mistyped run folder took half a second (pandas' import) to say so:
    `report` checked its folder first, `compare` imported the analysis
    first.  One process: main() in a fresh interpreter, then sys.modules."""
    run = make_run(tmp_path / "a", {"warm_pages": ["0"]}, lambda v: 1.0)
    code = ("import sys; from heaplab.__main__ import main; "
            f"rc = main(['compare', {run!r}, {str(tmp_path / 'missing')!r}]); "
            "print(rc, 'pandas' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert p.stdout.split() == ["2", "False"], (p.stdout, p.stderr)
    assert "missing: no such folder" in p.stderr, p.stderr


def test_compare_of_one_run_given_twice_is_refused(tmp_path, capsys):
    """`heaplab compare RUN RUN` (or results/latest beside the run it names)
    printed every effect as 'no' difference and exited 0."""
    run = make_run(tmp_path / "a", {"warm_pages": ["0", "64"]}, lambda v: 1.0)
    os.symlink("a", tmp_path / "latest")
    for other in (run, str(tmp_path / "latest"), str(tmp_path / "a") + "/"):
        assert main(["compare", run, other]) == 2
        err = capsys.readouterr().err
        assert "are the same run folder" in err and "name two runs" in err, err
    with pytest.raises(ValueError, match="are the same run folder"):
        hla.compare_runs(run, tmp_path / "latest")
    # two runs: compared (0 is still the answer of identical figures)
    other = make_run(tmp_path / "b", {"warm_pages": ["0", "64"]}, lambda v: 1.0)
    assert main(["compare", run, other]) == 0, capsys.readouterr().err


# ---- report: its warnings as its own lines; stopped part-way, it says so ------------------

def test_report_warnings_are_the_commands_lines_not_pythons(tmp_path):
    """A copy of an arm beside it (`on (1).json`) was named by a Python
    UserWarning: heaplab's source path and line number, then that line of
    code (`return [data for _, data in _arm_files(...)]`)."""
    res = _results(tmp_path / "res", _arm("E1", "on", 20), _arm("E1", "off", 40))
    (res / "E1" / "on (1).json").write_text((res / "E1" / "on.json").read_text())
    p = subprocess.run([sys.executable, "-m", "heaplab", "report", str(res)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stderr.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("heaplab report: warning: ") and "on (1).json" in lines[0] \
        and "two runs of one arm" in lines[0], lines


def test_write_atomic_names_the_file_it_could_not_write(tmp_path, monkeypatch):
    """ENOSPC from the write or fsync names no file ("[Errno 28] No space
    left on device": heaplab report printed just that), and a refused open
    named the hidden temporary file."""
    from heaplab import harness
    with pytest.raises(FileNotFoundError) as e:
        harness.write_atomic(str(tmp_path / "gone" / "t.csv"), "x\n")
    assert e.value.filename == str(tmp_path / "gone" / "t.csv"), e.value

    def full(fd):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(harness.os, "fsync", full)
    with pytest.raises(OSError) as e:
        harness.write_atomic(str(tmp_path / "t.csv"), "x\n")
    assert e.value.errno == 28 and e.value.filename == str(tmp_path / "t.csv"), e.value
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)     # no .tmp left


@pytest.mark.parametrize("stop", ["full", "ctrl-c"])
def test_a_report_stopped_part_way_says_it_is_incomplete(tmp_path, monkeypatch, capsys, stop):
    """A full disk (or Ctrl-C) at the third file left two files of the new
    report -- beside the last report's others -- and said "[Errno 28] No
    space left on device" (Ctrl-C: nothing), so the folder looked like a
    report.  Now the error names the file and says the report is
    incomplete, how many files were written; exit 1 (Ctrl-C: 130)."""
    res = _results(tmp_path / "res", _arm("E1", "on", 20), _arm("E1", "off", 40))
    from heaplab import harness
    real = harness.os.fsync
    calls = []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 4:     # (the first: the incomplete-report marker)
            if stop == "full":
                raise OSError(28, "No space left on device")
            raise KeyboardInterrupt
        real(fd)
    monkeypatch.setattr(harness.os, "fsync", fsync)
    rc = main(["report", str(res)])
    out, err = capsys.readouterr()
    assert rc == (1 if stop == "full" else 130), (out, err)
    assert out.count("wrote ") == 2, out
    assert (f"the report in {res / 'report'} is incomplete: 2 file(s) written before it "
            f"stopped") in err, err
    if stop == "full":
        assert "No space left on device: '" + str(res / "report" / "E1_footprint.png") in err, err
    else:
        assert err.startswith("heaplab report: interrupted; "), err
    assert f"(above; the folder keeps {hla.INCOMPLETE_MARKER} until a report" in err, err


@pytest.mark.parametrize("stop", ["full", "ctrl-c"])
def test_a_report_stopped_part_way_leaves_a_marker_in_its_folder(tmp_path, monkeypatch,
                                                                 capsys, stop):
    """The terminal said the report was incomplete, the folder did not:
    opened later, its two new files beside the last report's others read as
    a report.  Now INCOMPLETE-REPORT.txt is written before any file of the
    report and removed when it completes; a report run again says the
    earlier one did not complete, and completing, removes it."""
    res = _results(tmp_path / "res", _arm("E1", "on", 20), _arm("E1", "off", 40))
    out = res / "report"
    assert main(["report", str(res)]) == 0                  # complete: no marker
    assert sorted(os.listdir(out)) == ["E1_footprint.png", "E1_phase_cost.png",
                                       "E1_phases.csv", "E1_records.csv"]
    capsys.readouterr()
    from heaplab import harness
    real = harness.os.fsync
    calls = []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 3:
            if stop == "full":
                raise OSError(28, "No space left on device")
            raise KeyboardInterrupt
        real(fd)
    monkeypatch.setattr(harness.os, "fsync", fsync)
    assert main(["report", str(res)]) == (1 if stop == "full" else 130)
    capsys.readouterr()
    marker = out / "INCOMPLETE-REPORT.txt"
    text = marker.read_text()
    assert text.startswith(f"This report is incomplete: `heaplab report` of {res} into this "
                           f"folder, started "), text
    assert f"Run `python3 -m heaplab report {res} --out {out}` again" in text, text
    monkeypatch.setattr(harness.os, "fsync", real)
    assert main(["report", str(res)]) == 0
    said = capsys.readouterr().out
    assert (f"{out}: an earlier report here did not complete (INCOMPLETE-REPORT.txt); this one "
            f"replaces it") in said, said
    assert not marker.exists()


# ---- hand-edited records: a named error, never a traceback or another repeat -------------

def _with_index(a, ix):
    a["records"].append({**a["records"][0], "phase": "q", "index": ix})
    return a


@pytest.mark.parametrize("edit, said", [
    # a repeat of another type was another repeat of the arm (repeats 0, 'x'
    # and true side by side in E1_phases.csv's median) -- or, beside numbers,
    # pandas' "'<' not supported between 'int' and 'str'" traceback
    (lambda a: a.update(repeat="1"), r"'repeat' is '1', expected a whole number >= 0"),
    (lambda a: a.update(repeat=True), r"'repeat' is True, expected a whole number"),
    (lambda a: a.update(repeat=-1), r"'repeat' is -1, expected a whole number >= 0"),
    # "invalid literal for int() with base 10: 'zero': Error while type
    # casting for column 'index'" -- no file named
    (lambda a: _with_index(a, "1"), r"record 1 \(phase 'q'\): 'index' is '1', expected the "
                                    r"phase's position"),
    # a record's experiment of another type: a row of experiment 5 in E1's tables
    (lambda a: a["records"][0].update(experiment=5),
     r"record 0 \(phase 'p'\): 'experiment' is 5, expected a string"),
    # an integer past a float's range: an OverflowError traceback
    (lambda a: a["records"][0].update(phys_after=10 ** 400),
     r"'phys_after' is an integer of 401 digits, past a float's range"),
    (lambda a: a["records"][0].update(stats={"cycles": -10 ** 400}),
     r"'stats.cycles' is an integer of 401 digits"),
], ids=["repeat-str", "repeat-bool", "repeat-negative", "index-str", "record-experiment-int",
        "figure-past-float", "stat-past-float"])
def test_a_hand_edited_record_is_an_error_naming_the_file(tmp_path, edit, said):
    bad = _arm("E1", "on", 20, repeat=0)
    edit(bad)
    res = _results(tmp_path / "res", bad, _arm("E1", "off", 40))
    (res / "E1" / "on.json").rename(res / "E1" / "on.r0.json")
    (res / "E1" / "on.r1.json").write_text(json.dumps(_arm("E1", "on", 22, repeat=1)))
    with pytest.raises(ValueError, match=r"on\.r0\.json: not an arm's results: .*" + said), \
            warnings.catch_warnings():
        # (and no other word of it: a repeat `true` beside on.r1.json's 1 was
        # "both repeat 1", a warning, before the refusal)
        warnings.simplefilter("error")
        hla.records_frame(str(res))
    assert main(["report", str(res)]) == 2
    assert not os.path.exists(res / "report")


# ---- the notebook runner: Ctrl-C stops the run -------------------------------------------

def test_ctrl_c_stops_the_notebook_run_not_just_the_notebook(tmp_path):
    """nbclient's own SIGINT handler kills the kernel and goes on: a Ctrl-C
    was "FAIL ... the kernel died: Kernel died" with the kernel's ZMQError
    traceback, and the next notebook ran (a Ctrl-C needed per notebook).
    Now the run stops: the notebook's line says it was interrupted and how
    many were not run, exit 130, the kernel is shut down, no traceback.
    SIGINT goes to the runner's process group, as a terminal's Ctrl-C does
    (the kernel has a session of its own)."""
    import signal as sig
    from procs import gone, reap, wait_for_file
    from test_analysis import notebook
    mark = tmp_path / "kernel.pid"
    notebook(tmp_path / "a_slow.ipynb",
             f"import os, time\nopen({str(mark)!r}, 'w').write(str(os.getpid()))\n"
             "time.sleep(120)")
    notebook(tmp_path / "b_next.ipynb", "x = 1")
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, "-m", "heaplab.notebooks", str(tmp_path), "--out",
                          str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    try:
        kernel = int(wait_for_file(mark, p))
        os.killpg(p.pid, sig.SIGINT)
        stdout, stderr = p.communicate(timeout=60)
    finally:
        reap(p, group=True)
    assert p.returncode == 130, (stdout, stderr)
    assert f"stop {tmp_path / 'a_slow.ipynb'}  interrupted (Ctrl-C)" in stdout, stdout
    assert "1 notebook(s) after it not run" in stdout and "b_next" not in stdout, stdout
    assert "Traceback" not in stderr and "died" not in stdout + stderr, stderr
    assert not (out / "b_next.ipynb").exists()
    end = time.monotonic() + 30
    while not gone(kernel):
        assert time.monotonic() < end, f"the kernel {kernel} still runs"
        time.sleep(0.05)


# ---- a sweep's run folder: records of another run, a copy, another tool's meta.json -------

def test_a_run_folders_foreign_or_copied_task_records_are_named(tmp_path, capsys):
    """compare and the run's report read a record of another run's cell
    (values {'page_size': '16k'} filed under cell c000 of a warm_pages
    grid) as cell c000's -- its 99 in that cell's median (54.5 of 10 and
    99), and the cell shown as warm_pages=0.0; a copy beside a record
    (`on.r0 (1).json`) was one more repeat in every median; and another
    tool's meta.json (no grid) made both cells one: two rows
    'warm_pages=64', each compared with B's one.  Now: a named error (a
    record of another run), a warning naming both copies, a named error
    (not the meta.json of a heaplab run)."""
    a = make_run(tmp_path / "a", {"warm_pages": ["0", "64"]},
                 lambda v: 10.0 if v["warm_pages"] == "0" else 20.0)
    b = make_run(tmp_path / "b", {"warm_pages": ["0", "64"]}, lambda v: 11.0)
    rec = tmp_path / "a" / "E1" / "c000" / "on.r1.json"
    good = rec.read_text()
    d = json.loads(good)
    d["sweep"]["values"] = {"page_size": "16k"}
    d["effects_numeric"][0]["value"] = 99.0
    rec.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"on\.r1\.json: not a task record of the run: its "
                                         r"values \{'page_size': '16k'\} are not cell c000's "
                                         r"\{'warm_pages': '0'\} \(meta.json\)"):
        hla.compare_runs(a, b)
    assert main(["compare", a, b]) == 2
    assert "a record of another run; remove it or move it out" in capsys.readouterr().err
    d["sweep"]["values"], d["sweep"]["cell"] = {"warm_pages": "0"}, "c007"
    rec.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=r"cell 'c007' is no cell of the run"):
        hla.run_records(a)
    # a copy beside a record: named (both files), kept as load_arms keeps one
    rec.write_text(good)
    (rec.parent / "on.r1 (1).json").write_text(good)
    with pytest.warns(UserWarning, match=r"are both experiment E1 cell c000 arm 'on' "
                                         r"repeat 1") as got:
        hla.run_records(a)
    said = str(got[0].message)
    assert "on.r1 (1).json" in said and "c000/on.r1.json" in said, said
    assert main(["compare", a, b]) == 0
    assert "heaplab compare: warning: " in capsys.readouterr().err
    (rec.parent / "on.r1 (1).json").unlink()
    # another tool's meta.json
    (tmp_path / "a" / "meta.json").write_text(json.dumps({"name": "other", "version": 2}))
    for argv in (["compare", a, b], ["report", a]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "meta.json: not the meta.json of a heaplab run: 'run_id' is None" in err, err


def test_a_run_report_refused_part_way_says_it_is_incomplete(tmp_path, capsys, monkeypatch):
    """A run report refused part-way: it wrote the effect plot and the first
    cell's footprint, then refused the phase-cost plot, exit 2 -- the two
    files left looking like the report.  (The refusal was the run's records
    having effects but no phase figures, "no figure(s) ['phys_growth',
    'duration_s']"; since session 41 such a run is reported without a
    phase-cost plot, said -- test_hostile_s41 -- so the refusal is made
    here.)"""
    run = make_run(tmp_path / "a", {"warm_pages": ["0", "64"]}, lambda v: 1.0)

    def refuse(*a, **kw):
        raise ValueError("experiment E1: no figure(s) ['phys_growth'] in its records")
    monkeypatch.setattr(hla, "_cost_figures", lambda present, exp, say: ["phys_growth"])
    monkeypatch.setattr(hla, "plot_phase_cost", refuse)
    assert main(["report", run]) == 2
    out, err = capsys.readouterr()
    n = out.count("wrote ")
    assert n >= 1, out
    assert (f"no figure(s) ['phys_growth'] in its records; the "
            f"report in {tmp_path / 'a' / 'report'} is incomplete: {n} file(s) written") in err, err
    # and the folder says so later (a sweep run's report keeps the marker too)
    assert (tmp_path / "a" / "report" / hla.INCOMPLETE_MARKER).is_file()


def test_compare_says_what_it_takes(tmp_path, capsys):
    """`heaplab compare --help` listed RUN_A and RUN_B with no word of what
    they are; two results folders of `pytest experiments` (what a newcomer
    has) were "not a sweep run folder (no meta.json)" and nothing more."""
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    assert "RUN_A a sweep's run folder: RESULTS/<run-id> of `heaplab run`" in help_text, help_text
    res = _results(tmp_path / "res", _arm("E1", "on", 20))
    assert main(["compare", str(res), str(res)]) == 2
    err = capsys.readouterr().err
    assert ("not a sweep run folder (no meta.json); compare takes two sweeps' run folders "
            "(heaplab run's RESULTS/<run-id>); a results folder is heaplab report's") in err, err


# ---- a results folder holding two sessions' arms of one experiment ------------------------

def test_an_experiments_arms_from_two_sessions_are_said(tmp_path, capsys):
    """A session interrupted (or run with -k) after E1's `off` arm saved its
    JSON over the last complete session's: the report drew `off` of one
    session beside `on` of the other as one run, and said nothing (each arm
    records its session; the report read none of it).  One session, or arms
    recording none: no word."""
    s1 = {"id": "s1", "started": "2026-12-07T01:00:00Z"}
    s2 = {"id": "s2", "started": "2026-12-07T02:00:00Z"}
    res = _results(tmp_path / "res", _arm("E1", "on", 20, session=s1),
                   _arm("E1", "off", 40, session=s2), _arm("E2", "on", 20, session=s1),
                   _arm("E2", "off", 40, session=s1), _arm("E3", "on", 20),
                   _arm("E3", "off", 40))
    assert main(["report", str(res)]) == 0
    err = capsys.readouterr().err.splitlines()
    assert err == ["heaplab report: warning: E1: its arms come from 2 sessions -- session s1 "
                   "(started 2026-12-07T01:00:00Z): on; session s2 (started "
                   "2026-12-07T02:00:00Z): off: compared as one run's (an interrupted or "
                   "partial session's arms beside an older one's); run the experiment again "
                   "whole for one session's records"], err


# ---- a FIFO among the records ---------------------------------------------------------------

def test_a_fifo_named_like_a_record_is_named_not_waited_on(tmp_path, capsys):
    """`mkfifo results/E1/x.json` (or one named meta.json below the folder):
    `heaplab report` waited in open() for a writer, for good, with no word.
    Now the file is named (not a regular file: a FIFO), exit 2.  The report
    runs in-process: a regression hangs this test (pytest's timeout, if
    any, or the session's) rather than fail -- SIGALRM bounds it here."""
    import signal as sig
    res = _results(tmp_path / "res", _arm("E1", "on", 20), _arm("E1", "off", 40))
    os.mkfifo(res / "E1" / "x.json")
    os.makedirs(res / "sub")
    os.mkfifo(res / "sub" / "meta.json")

    class Hung(Exception):
        """(not TimeoutError: an OSError, which the readers catch)"""

    def hung(signum, frame):
        raise Hung("heaplab report waited on a FIFO")

    def report():
        sig.alarm(20)
        try:
            return main(["report", str(res)])
        finally:
            sig.alarm(0)
    old = sig.signal(sig.SIGALRM, hung)
    try:
        assert report() == 2
        err = capsys.readouterr().err
        assert "E1/x.json: cannot be read (not a regular file: a FIFO)" in err, err
        (res / "E1" / "x.json").unlink()
        assert report() == 2
        err = capsys.readouterr().err
    finally:
        sig.signal(sig.SIGALRM, old)
    assert "sub/meta.json: cannot be read (not a regular file: a FIFO)" in err, err


def test_report_of_a_missing_results_folder_says_what_writes_one(tmp_path, capsys):
    """A fresh clone has no results/: `heaplab report results` (what
    docs/analysis.md shows first) said "results: no such folder" and no
    more."""
    assert main(["report", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"heaplab report: {tmp_path / 'results'}: no such folder "
                          "(`python3 -m pytest experiments` -- make experiments -- writes "
                          "results/"), err


def test_an_earlier_reports_files_left_in_the_folder_are_named(tmp_path, capsys):
    """Reported again into the same --out after E2 left the results: E2's
    four files of the earlier report stayed beside E1's new ones, nothing
    said -- the folder read as a report of E1 and E2.  Now a warning names
    them; files that are no report's (notes.txt) are no concern of it."""
    res = _results(tmp_path / "res", _arm("E1", "on", 20), _arm("E2", "on", 20))
    out = tmp_path / "out"
    assert main(["report", str(res), "--out", str(out)]) == 0
    assert capsys.readouterr().err == ""
    (out / "notes.txt").write_text("mine\n")
    import shutil
    shutil.rmtree(res / "E2")
    assert main(["report", str(res), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert err == (f"heaplab report: warning: {out} holds 4 file(s) of an earlier report that "
                   f"this one did not write: E2_footprint.png, E2_phase_cost.png, "
                   f"E2_phases.csv, E2_records.csv; not part of this report -- remove them\n"), err


def test_an_infinite_figure_is_named_not_blanked_without_a_word(tmp_path, capsys):
    """A hand-edited or foreign record's Infinity (JSON's: phys_after, a
    note) became no row -- a blank cell in <experiment>_phases.csv, nothing
    said.  Now a warning names the file, the record and each figure; a NaN
    (a note may mean "no value") is still no row, without a warning."""
    on = _arm("E1", "on", 20)
    on["records"][0]["phys_after"] = float("inf")
    on["records"][0]["notes"] = {"rate_mib_s": float("-inf"), "spare_mib": float("nan")}
    res = _results(tmp_path / "res", on, _arm("E1", "off", 40))
    assert "Infinity" in (res / "E1" / "on.json").read_text()
    assert main(["report", str(res)]) == 0
    err = capsys.readouterr().err
    assert err == (f"heaplab report: warning: {res / 'E1' / 'on.json'} (E1/on): 2 figure(s) "
                   f"not a finite number -- record 0 (phase 'p'): phys_after = inf; record 0 "
                   f"(phase 'p'): "
                   f"notes.rate_mib_s = -inf: not a measurement, left out of the tables (a "
                   f"blank cell)\n"), err
    # the table: no row for them (as documented), the warning says why
    df = hla.records_frame(str(res / "E1" / "off.json"))
    assert not df.empty
    off = _arm("E1", "off", 40)
    off["records"][0]["notes"] = {"spare_mib": float("nan")}
    (res / "E1" / "off.json").write_text(json.dumps(off))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hla.records_frame(str(res / "E1" / "off.json"))      # a NaN: no warning
    with pytest.warns(UserWarning,
                      match=r"on\.json \(E1/on\): 2 figure\(s\) not a finite number"):
        hla.records_frame(str(res / "E1" / "on.json"))
