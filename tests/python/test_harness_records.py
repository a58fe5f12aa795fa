"""Records that must not mislead (helper `records`, session 11): a phase
whose with block raised, a failed arm's rows in records.csv, the analysis
helpers on such records, half-written files, a command arm's script that
never returns, and Ctrl-C during Experiment.run.  Each test failed before
its fix (the commit that added it says how that was checked)."""
import csv
import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from heaplab.harness import ArmFailed, ArmResult, load_arms, run_command_arm, save_arm

from procs import gone, pids_naming, reap, wait_for_file

MiB = 1 << 20


def _read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


# ---- 1. a phase that raised, a failed arm --------------------------------------------------

FAILING = """
from heaplab.harness import Experiment
T = Experiment("T", "a phase that raises")

@T.arm("good")
def good(rec, **options):
    with rec.phase("fill"):
        x = bytearray(1 << 20)

@T.arm("bad")
def bad(rec, **options):
    with rec.phase("fill"):
        x = bytearray(1 << 20)
    with rec.phase("drop"):
        raise RuntimeError("boom\\nsecond line")
"""


def test_a_phase_that_raised_says_so_in_its_record_and_the_csv(run_experiment_source, tmp_path):
    """A phase whose with block raised was recorded like a complete one, and
    records.csv had no status nor error column: Experiment.run saved the
    failed arm before raising, and its rows looked like any other arm's."""
    with pytest.raises(ArmFailed, match="boom"):
        run_experiment_source("records_failing", FAILING)
    folder = tmp_path / "results" / "T"
    bad = json.loads((folder / "bad.json").read_text())
    status = {r["phase"]: r.get("status") for r in bad["records"]}
    assert status == {"fill": "ok", "drop": "raised: RuntimeError: boom"}, status
    good = json.loads((folder / "good.json").read_text())
    assert [r.get("status") for r in good["records"]] == ["ok"]
    rows = _read_csv(folder / "records.csv")
    by = {(r["arm"], r["phase"]): r for r in rows}
    assert set(by) == {("good", "fill"), ("bad", "fill"), ("bad", "drop")}, rows
    assert by[("good", "fill")]["status"] == "ok" and by[("good", "fill")]["arm_error"] == ""
    assert by[("bad", "drop")]["status"] == "raised: RuntimeError: boom"
    # the arm's error is on every row of the arm, on one line
    for key in (("bad", "fill"), ("bad", "drop")):
        assert by[key]["arm_error"] == "RuntimeError: boom", by[key]
    assert (folder / "records.csv").read_text().count("\n") == 4


CRASHES_AT_EXIT = """
import atexit, os
from heaplab.harness import Experiment
T = Experiment("T", "an arm whose process fails after its JSON")

@T.arm("a")
def a(rec, **options):
    # (a C library's destructor that crashes, an atexit handler's failure)
    atexit.register(os._exit, 3)
    with rec.phase("fill"):
        x = bytearray(1 << 20)
"""


def test_an_arm_that_exits_non_zero_after_its_json_failed(run_experiment_source, tmp_path):
    """An arm's process that wrote its whole JSON and then exited 3 was a
    good arm to Experiment.run: its record saved without an error, the
    result returned -- where the progress line said '(failed)' and a sweep's
    task of it is failed with its exit status (the mutation audit of
    session 37).  Now the arm's error says so and run() raises ArmFailed;
    its records are kept."""
    from heaplab.harness import add_progress_listener, remove_progress_listener
    seen = []
    fn = add_progress_listener(lambda event, label, info: seen.append((event, info.get("ok"))))
    try:
        with pytest.raises(ArmFailed, match="exit 3 after it wrote its arm JSON"):
            run_experiment_source("records_exit3", CRASHES_AT_EXIT)
    finally:
        remove_progress_listener(fn)
    assert ("end", False) in seen, seen
    data = json.loads((tmp_path / "results" / "T" / "a.json").read_text())
    assert data["returncode"] == 3 and "exit 3 after it wrote its arm JSON" in data["error"]
    assert [r["phase"] for r in data["records"]] == ["fill"], data["records"]
    rows = _read_csv(tmp_path / "results" / "T" / "records.csv")
    assert [r["arm_error"] for r in rows] == ["T/a: the arm's process exit 3 after it wrote its "
                                              "arm JSON"], rows


def test_a_command_arm_phase_that_raised_says_so(tmp_path):
    def script(ctl):
        with ctl.phase("ok"):
            pass
        with ctl.phase("broken"):
            raise ValueError("bad payload")
    data = run_command_arm(["sleep", "30"], allocator="glibc", script=script, timeout=60,
                           experiment="T", arm="cmd")
    assert "bad payload" in data["error"]
    assert [r["status"] for r in data["records"]] == ["ok", "raised: ValueError: bad payload"]
    save_arm(data, str(tmp_path))
    rows = _read_csv(tmp_path / "T" / "records.csv")
    assert [(r["phase"], r["status"], r["arm_error"]) for r in rows] == [
        ("ok", "ok", "ValueError: bad payload"),
        ("broken", "raised: ValueError: bad payload", "ValueError: bad payload")]


def _record(phase, index, status=None, before=10 * MiB, after=20 * MiB):
    r = {"experiment": "E", "arm": "a", "phase": phase, "index": index,
         "t_start_s": index * 0.1, "t_end_s": index * 0.1 + 0.1, "duration_s": 0.1,
         "phys_before": before, "phys_after": after, "phys_peak": after, "phys_low": before,
         "phys_low_after_mark": None, "rss_before": before, "rss_after": after,
         "rss_peak": after, "samples": 3, "notes": {}}
    if status is not None:
        r["status"] = status
    return r


def _arm(name, records, error=None):
    return {"experiment": "E", "title": "t", "arm": name, "options": {}, "params": {},
            "pid": 1, "error": error, "records": [dict(r, arm=name) for r in records],
            "notes": {}, "series": []}


def test_analysis_refuses_or_flags_records_of_failed_phases(tmp_path):
    """records_frame, wide and plot_phase_cost used the records of a phase
    that raised, or of a failed arm, like any other: an effect computed
    from them (phys_growth, phys_returned) looked like a measurement."""
    hla = pytest.importorskip("heaplab.analysis")
    good = _arm("good", [_record("fill", 0, "ok"), _record("drop", 1, "ok")])
    raised = _arm("raised", [_record("fill", 0, "ok"),
                             _record("drop", 1, "raised: RuntimeError: boom")])
    late = _arm("late", [_record("fill", 0, "ok")], error=(
        'Traceback (most recent call last):\n  File "e.py", line 3, in arm\n'
        "    d['x']\nKeyError: 'x'\n"))
    src = [good, raised, late]
    for fn in (hla.records_frame, hla.wide, hla.plot_phase_cost):
        with pytest.raises(ValueError, match="raised phase 'drop': raised: RuntimeError: boom"):
            fn(src)
    with pytest.raises(ValueError, match="late phase 'fill': arm failed: KeyError: 'x'"):
        hla.records_frame([good, late])
    df = hla.records_frame(src, failed="flag")
    st = df.drop_duplicates(["arm", "phase"]).set_index(["arm", "phase"])["status"].to_dict()
    assert st == {("good", "fill"): "ok", ("good", "drop"): "ok", ("raised", "fill"): "ok",
                  ("raised", "drop"): "raised: RuntimeError: boom",
                  ("late", "fill"): "arm failed: KeyError: 'x'"}, st
    with pytest.raises(ValueError, match="records of failed phases"):
        hla.wide(df)
    assert len(hla.wide(df, failed="flag")) == 5
    kept = hla.records_frame(src, failed="drop")
    assert set(zip(kept["arm"], kept["phase"])) == {("good", "fill"), ("good", "drop"),
                                                   ("raised", "fill")}
    assert list(hla.wide(src, failed="drop").index.get_level_values("arm")) == \
        ["good", "good", "raised"]
    hla.plot_phase_cost(src, failed="drop")
    with pytest.raises(ValueError, match="failed='maybe'"):
        hla.records_frame(src, failed="maybe")
    # older records without a status, of an arm without an error: ok
    assert set(hla.records_frame([_arm("old", [_record("fill", 0)])])["status"]) == {"ok"}
    # the derived figures of the harness's own helper refuse too
    res = ArmResult(raised)
    assert res.phase("fill").growth == 10 * MiB
    with pytest.raises(ValueError, match="'drop' raised: RuntimeError: boom"):
        res.phase("drop").growth
    # report(): refused before anything is written, unless asked
    folder = tmp_path / "res"
    for a in src:
        save_arm(a, str(folder))
    with pytest.raises(ValueError, match="failed='flag'"):
        hla.report(str(folder), str(tmp_path / "out"))
    assert not (tmp_path / "out").exists()        # not even the folder is made
    written = hla.report(str(folder), str(tmp_path / "out"), failed="flag")
    flagged = __import__("pandas").read_csv(tmp_path / "out" / "E_records.csv")
    assert (flagged["status"] != "ok").any() and written


def test_sweep_effects_leave_out_a_phase_that_raised():
    from heaplab.sweep import effects_of
    r = _record("drop", 0, "raised: RuntimeError: boom", before=30 * MiB)
    r["phys_low_after_mark"] = 5 * MiB
    effects = effects_of({"records": [_record("fill", 0, "ok"), r]})
    assert [e["effect"] for e in effects] == ["peak_above_start"], effects


def test_a_phase_object_entered_twice_is_refused():
    """Entering one phase object a second time gave two records sharing one
    notes dict (each had the other's notes) and the second kept the first
    one's mark: phys_low_after_mark 0 for a phase that never marked, where
    null is the record's word for "not marked"."""
    import heaplab
    from heaplab.harness import Recorder
    rec = Recorder("T", "a")
    try:
        with heaplab.Heap() as h:
            ph = rec.phase("p", heap=h)
            with ph:
                ph.note("first", 1)
                ph.mark("drop")
            with pytest.raises(RuntimeError, match="phase 'p' was already entered"):
                with ph:
                    ph.note("second", 2)
            with rec.phase("p", heap=h) as again:      # a fresh phase object is the way
                again.note("second", 2)
    finally:
        rec.sampler.stop()
    first, second = rec.records
    assert first["notes"]["first"] == 1 and "second" not in first["notes"], first["notes"]
    assert second["notes"] == {"second": 2} and second["phys_low_after_mark"] is None, second


def test_a_command_phase_object_entered_twice_is_refused():
    """The same for a run_command_arm script's phases (CommandPhase)."""
    def script(ctl):
        ph = ctl.phase("p")
        with ph:
            ph.mark("m")
        with ph:
            ph.note("second", 2)
    data = run_command_arm(["sleep", "30"], allocator="glibc", script=script, timeout=60)
    assert "phase 'p' was already entered" in data["error"], data["error"]
    assert [r["phase"] for r in data["records"]] == ["p"], data["records"]
    assert "second" not in data["records"][0]["notes"]


def test_phases_do_not_nest():
    """A phase begun inside another reset the arm's one sampler: the outer
    phase's peak missed what came before the inner one, and its lowest after
    a mark read 0 (a 'returned' larger than the whole footprint).  Nesting is
    refused, as is set_interval inside a phase; the outer phase's record is
    whole and later phases run."""
    import heaplab
    from heaplab.harness import Recorder
    rec = Recorder("T", "a")
    try:
        with heaplab.Heap() as h:
            with pytest.raises(RuntimeError, match="phase 'inner' begun inside phase 'outer'"):
                with rec.phase("outer", heap=h) as ph:
                    ph.mark("drop")
                    with rec.phase("inner", heap=h):
                        pass
            with pytest.raises(RuntimeError, match="set_interval inside phase 'p2'"):
                with rec.phase("p2", heap=h):
                    rec.set_interval(0.01)
            with rec.phase("after", heap=h):         # nothing is left open
                pass
            rec.set_interval(0.01)                   # between phases it is allowed
    finally:
        rec.sampler.stop()
    assert [r["phase"] for r in rec.records] == ["outer", "p2", "after"], rec.records
    outer = rec.records[0]
    assert outer["status"].startswith("raised: RuntimeError"), outer["status"]
    # its mark's window was never reset: the lowest after it is a real reading
    assert outer["phys_low_after_mark"] > 0, outer


def test_a_phases_figures_come_from_the_right_samples():
    """Each figure of an arm's phase from its own reading (the mutation
    audit of session 37): phys_peak the highest sample of the phase (a
    48 MiB buffer made and freed inside it: the peak is above the before
    and the after by most of it), phys_after the footprint at its end (a
    buffer kept: the growth is most of it), phys_low_after_mark the lowest
    after the mark (a buffer freed after it) and null in a phase that never
    marked -- whose `returned` is then an error, not a number."""
    from heaplab.harness import PhaseRecord, Recorder
    size = 48 * MiB
    rec = Recorder("T", "a")
    try:
        with rec.phase("spike"):
            x = b"\x01" * size
            rec.sampler.summary()           # (a sample taken now, the buffer charged)
            del x
        with rec.phase("hold"):
            kept = b"\x01" * size
        with rec.phase("drop") as ph:
            ph.mark("free")
            del kept
    finally:
        rec.sampler.stop()
    spike, hold, drop = (PhaseRecord(r) for r in rec.records)
    assert spike.peak_growth > size * 3 // 4, spike
    assert spike["phys_peak"] - spike["phys_after"] > size * 3 // 4, spike
    assert spike["phys_low_after_mark"] is None and hold["phys_low_after_mark"] is None
    with pytest.raises(ValueError, match="not marked"):
        hold.returned
    assert hold.growth > size * 3 // 4, hold
    assert hold["phys_low"] <= hold["phys_before"] + 4 * MiB, hold
    assert drop.returned > size * 3 // 4, drop
    assert drop["phys_low_after_mark"] <= drop["phys_after"], drop


def test_a_phase_whose_start_fails_leaves_no_phase_open():
    """A phase's start that raises (here: the sampler stopped under it) must
    not leave the arm refusing every later phase as nested."""
    import heaplab
    from heaplab.harness import Recorder
    rec = Recorder("T", "a")
    rec.sampler.stop()
    with pytest.raises(Exception):
        with rec.phase("first"):
            pass
    assert rec._in_phase is None
    rec.sampler = heaplab.Sampler(interval_s=0.002)
    try:
        with rec.phase("second"):
            pass
    finally:
        rec.sampler.stop()
    assert [r["phase"] for r in rec.records] == ["second"]


def test_command_phases_do_not_nest():
    """The same for a run_command_arm script's phases."""
    def script(ctl):
        with ctl.phase("outer") as ph:
            ph.mark("m")
            with ctl.phase("inner"):
                pass
    data = run_command_arm(["sleep", "30"], allocator="glibc", script=script, timeout=60)
    assert "phase 'inner' begun inside phase 'outer'" in data["error"], data["error"]
    assert [r["phase"] for r in data["records"]] == ["outer"], data["records"]
    assert data["records"][0]["phys_low_after_mark"] is not None


@pytest.mark.parametrize("how", ["timeout", "stop_signal", "exits"])
def test_a_command_arm_leaves_nothing_it_started_running(how):
    """run_command_arm with an allocator started the command in the caller's
    process group and stopped only the command: a helper it had started
    (`sleep 300 &`) went on running with init as its parent -- killed at the
    arm's timeout, stopped by its stop signal, or ended by itself.  The
    command now has a session of its own, whose leftovers are killed when it
    has ended, as an arm's process group is."""
    tag = f"heaplab-test-helper-{os.getpid()}-{how}"
    helper = f"(exec -a {tag} sleep 300) &"
    if how == "timeout":
        cmd, kw = ["bash", "-c", f"{helper} wait"], {"timeout": 1.5}
    elif how == "stop_signal":
        # the command ignores nothing: SIGTERM ends bash; its helper stays
        cmd = ["bash", "-c", f"{helper} sleep 60"]
        kw = {"timeout": 60, "script": lambda ctl: time.sleep(0.3),
              "stop_signal": signal.SIGTERM}
    else:
        cmd, kw = ["bash", "-c", f"{helper} sleep 0.3"], {"timeout": 60}
    try:
        data = run_command_arm(cmd, allocator="glibc", **kw)
        left = pids_naming(tag)
        deadline = time.monotonic() + 5          # (SIGKILL is delivered, then reaped by init)
        while left and time.monotonic() < deadline:
            time.sleep(0.05)
            left = pids_naming(tag)
        assert not left, (how, data["error"], left)
    finally:
        for pid in pids_naming(tag):
            os.kill(pid, signal.SIGKILL)
    if how == "timeout":
        assert "still running at the arm's timeout" in data["error"], data["error"]
    else:
        assert data["error"] is None, data["error"]


PID_REUSE = """
import subprocess, time
from heaplab.harness import run_command_arm
victim = {}
def script(ctl):
    while ctl.alive():                    # (reaps the command: its pid is free)
        time.sleep(0.01)
    # the next process of this PID namespace gets the command's pid
    with open("/proc/sys/kernel/ns_last_pid", "w") as f:
        f.write(str(ctl.pid - 1))
    victim["p"] = subprocess.Popen(["sleep", "100"], start_new_session=True)
    victim["pid"] = ctl.pid
data = run_command_arm(["true"], allocator="glibc", script=script, timeout=30, stop_signal=None)
v = victim["p"]
time.sleep(0.2)
print("reused", v.pid == victim["pid"], "error", data["error"], "victim",
      "killed" if v.poll() is not None else "alive", flush=True)
v.kill(); v.wait()
"""


def test_a_command_arm_kills_no_group_but_its_own():
    """d197192 killed the command's process group, named by its pid, after
    reaping it (ctl.alive() reaps it as soon as it ends): by then an
    unrelated session leader could have that pid, and its whole group was
    killed.  The group is a keeper's now, reaped only after the kill.  The
    pid's reuse is made certain in a PID namespace of the test's own
    (ns_last_pid there is the namespace's, not the machine's)."""
    import shutil
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare (util-linux)")
    p = subprocess.run([unshare, "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                        PID_REUSE], capture_output=True, text=True, timeout=120)
    if p.returncode != 0 and "Operation not permitted" in p.stderr and "unshare" in p.stderr:
        pytest.skip(f"no PID namespace here: {p.stderr.strip()}")
    assert p.returncode == 0, (p.stdout, p.stderr[-2000:])
    assert "reused True error None victim alive" in p.stdout, (p.stdout, p.stderr[-2000:])


def test_error_summary_is_the_exception_line():
    """A message with an indented line of its own ('...:\\n  phys 10 MiB')
    was taken for the last frame: error_summary returned the whole traceback,
    newlines and all, as records.csv's arm_error."""
    import traceback
    from heaplab.harness import error_summary

    def tb_of(fn):
        try:
            fn()
        except Exception:
            return traceback.format_exc()

    def indented():
        raise ValueError("two figures disagree:\n  phys 10 MiB\n  resident 12 MiB")

    def chained():
        try:
            raise KeyError("inner")
        except KeyError:
            raise RuntimeError("outer")       # "During handling of the above..."

    assert error_summary(tb_of(indented)) == "ValueError: two figures disagree:"
    assert error_summary(tb_of(chained)) == "RuntimeError: outer"
    assert error_summary(tb_of(lambda: 1 / 0)) == "ZeroDivisionError: division by zero"
    assert error_summary("E1/on: interrupted (KeyboardInterrupt): the arm\n  was killed") == \
        "E1/on: interrupted (KeyboardInterrupt): the arm"
    assert error_summary(None) == "" and error_summary("") == ""
    assert error_summary("   ") == "" and error_summary("\n") == ""     # (an IndexError)


def test_write_csv_leaves_out_an_arm_it_cannot_read(tmp_path):
    """An arm JSON with "records": null (old or damaged) beside a good one:
    save_arm's write_csv raised TypeError ('NoneType' object is not
    iterable), naming no file, and records.csv was not rewritten.  It is left
    out with a warning naming it, as a file that is not JSON is."""
    from heaplab.harness import write_csv
    ex = tmp_path / "EX"
    ex.mkdir()
    (ex / "old.json").write_text('{"experiment": "EX", "arm": "old", "records": null}')
    (ex / "nophase.json").write_text('{"experiment": "EX", "arm": "np", "records": [{}]}')
    good = {"experiment": "EX", "arm": "new", "error": None,
            "records": [{"experiment": "EX", "arm": "new", "phase": "p", "phys_before": 1}]}
    (ex / "new.json").write_text(json.dumps(good))
    with pytest.warns(UserWarning) as got:
        write_csv(str(ex))
    said = " ".join(str(w.message) for w in got)
    assert f"{ex / 'old.json'}: not an arm's results: 'records' is null" in said, said
    assert f"{ex / 'nophase.json'}: not an arm's results: record 0" in said, said
    with open(ex / "records.csv") as f:
        rows = list(csv.DictReader(f))
    assert [(r["arm"], r["phase"], r["phys_before"]) for r in rows] == [("new", "p", "1")], rows


# ---- 2. half-written files -------------------------------------------------------------------

class _Unwritable:
    """A value json cannot encode: json.dump has written part of the file
    by the time it reaches it."""


def _files(folder):
    # (.records.lock, .run.lock: the folder's locks, harness.records_lock -- not records)
    return sorted(p.name for p in folder.iterdir() if p.name not in (".records.lock",
                                                                     ".run.lock"))


def test_a_failed_save_leaves_the_old_files_whole(tmp_path, monkeypatch):
    """save_arm wrote the arm's JSON in place with json.dump, and write_csv
    records.csv in place: a failure or a Ctrl-C in the middle left a
    truncated file where the complete one was."""
    import heaplab.harness as harness
    data = _arm("a", [_record("fill", 0, "ok")])
    save_arm(data, str(tmp_path))
    folder = tmp_path / "E"
    before = {n: (folder / n).read_text() for n in _files(folder)}
    assert set(before) == {"a.json", "records.csv"}
    bad = dict(data, notes={"x": "y" * 10000, "z": _Unwritable()})
    with pytest.raises(TypeError, match="_Unwritable"):
        save_arm(bad, str(tmp_path))
    assert {n: (folder / n).read_text() for n in _files(folder)} == before

    class Interrupted(harness.csv.DictWriter):
        def writerows(self, rows):
            self.writerow(rows[0])
            raise KeyboardInterrupt
    monkeypatch.setattr(harness.csv, "DictWriter", Interrupted)
    data2 = _arm("b", [_record("fill", 0, "ok"), _record("drop", 1, "ok")])
    with pytest.raises(KeyboardInterrupt):
        save_arm(data2, str(tmp_path))
    assert (folder / "records.csv").read_text() == before["records.csv"]
    # no temporary file is left behind
    assert _files(folder) == ["a.json", "b.json", "records.csv"], _files(folder)


def test_load_arms_names_a_file_that_is_not_json(tmp_path):
    """load_arms skipped a *.json file that was not valid JSON without a
    word: a table silently short of an arm (the one a crash cut short)."""
    from heaplab.harness import load_arms
    save_arm(_arm("a", [_record("fill", 0, "ok")]), str(tmp_path))
    cut = tmp_path / "E" / "b.json"
    cut.write_text(json.dumps(_arm("b", [_record("fill", 0, "ok")]))[:100])
    (tmp_path / "E" / "meta.json").write_text('{"not": "an arm"}')
    with pytest.raises(ValueError, match=f"{cut}: is not valid JSON"):
        load_arms(str(tmp_path))
    hla = pytest.importorskip("heaplab.analysis")
    with pytest.raises(ValueError, match=f"{cut}: is not valid JSON"):
        hla.records_frame(str(tmp_path))
    skipped = []
    with pytest.warns(UserWarning, match="b.json is not valid JSON"):
        found = load_arms(str(tmp_path), skipped=skipped)
    assert [a["arm"] for a in found] == ["a"]
    assert [p for p, _ in skipped] == [str(cut)] and "not valid JSON" in skipped[0][1]
    # writing the CSV goes on without it, and says so
    with pytest.warns(UserWarning, match="b.json is not valid JSON"):
        save_arm(_arm("c", [_record("fill", 0, "ok")]), str(tmp_path))
    assert [r["arm"] for r in _read_csv(tmp_path / "E" / "records.csv")] == ["a", "c"]


def _sweep_run(tmp_path):
    """A sweep run folder by hand: meta.json, a complete task record a.r1
    and b.r1 cut short (as a crash of an older heaplab left one)."""
    import re
    run = tmp_path / "run"
    cell = run / "E" / "c000"
    cell.mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"run_id": "r", "grid": {}, "experiment": "E"}))

    def task(arm):
        sw = {"key": f"E-c000-{arm}-r1", "status": "ok", "experiment": "E", "cell": "c000",
              "arm": arm, "repeat": 1, "values": {}}
        return {**_arm(arm, [_record("fill", 0, "ok")]), "sweep": sw}
    (cell / "a.r1.json").write_text(json.dumps(task("a")))
    cut = cell / "b.r1.json"
    cut.write_text(json.dumps(task("b"))[:80])
    return run, cut, re.escape(str(cut))


def test_sweep_record_readers_name_a_record_that_is_not_json(tmp_path):
    """run_records and complete_records passed over a task record that was
    not valid JSON without a word (a sweep frame silently short of a task);
    they now raise naming it, as load_arms does, and skipped=[] loads the
    others and lists it."""
    from heaplab.sweep import complete_records
    hla = pytest.importorskip("heaplab.analysis")
    run, cut, cut_re = _sweep_run(tmp_path)
    for read, name in ((complete_records, "complete_records"), (hla.run_records, "run_records")):
        with pytest.raises(ValueError, match=f"{cut_re}: is not valid JSON.*"
                                             rf"pass skipped=\[\] to {name} to load the others"):
            read(str(run))
        skipped = []
        with pytest.warns(UserWarning, match="b.r1.json is not valid JSON"):
            found = read(str(run), skipped=skipped)
        assert [p for p, _ in skipped] == [str(cut)] and "not valid JSON" in skipped[0][1]
        arms = list(found) if isinstance(found, dict) else [d["sweep"]["key"] for d in found]
        assert arms == ["E-c000-a-r1"], arms
    # the frames built on run_records say so too
    with pytest.raises(ValueError, match=f"{cut_re}: is not valid JSON"):
        hla.sweep_frame(str(run))
    # a file that cannot be read is named the same way
    cut.unlink()
    cut.mkdir()                      # open() fails: IsADirectoryError
    with pytest.raises(ValueError, match=f"{cut_re}: cannot be read"):
        complete_records(str(run))


@pytest.mark.parametrize("content,why", [
    ('{"sweep": null, "records": []}', "no 'sweep' object"),
    ('{"sweep": {"status": "ok"}, "records": []}', "sweep['experiment'] is None, expected str"),
    ("[]", "a JSON list, not an object"),
    ("null", "a JSON NoneType, not an object"),
])
def test_run_records_name_json_that_is_not_a_task_record(tmp_path, content, why):
    """JSON that is no task record in a run folder was a TypeError or
    KeyError from inside heaplab report / compare (naming no file), or was
    passed over without a word ([], {}, null: compare counted a task short).
    run_records names it, as it names a file that is not JSON."""
    hla = pytest.importorskip("heaplab.analysis")
    run, cut, cut_re = _sweep_run(tmp_path)
    cut.write_text(content)
    with pytest.raises(ValueError, match=f"{cut_re}: not a task record of the run: "
                                         f"{re.escape(why)}"):
        hla.sweep_frame(str(run))
    skipped = []
    with pytest.warns(UserWarning, match="not a task record"):
        found = hla.run_records(str(run), skipped=skipped)
    assert [d["sweep"]["arm"] for d in found] == ["a"] and skipped[0][0] == str(cut)


# ---- 2b. the Lua harness's phase records ---------------------------------------------------

LUA_ARM = r"""
local H = require "harness"
local heaplab = require "heaplab"
H.main{
  experiment = "T", title = "a Lua phase that raises",
  arms = { good = {}, bad = {}, badnote = {}, badeffect = {}, nested = {}, badname = {} },
  body = function(rec, options, params)
    local h = assert(heaplab.heap(options))
    rec:phase("fill", h, function(ph) ph:note("n", 1) end)
    if arg[1] == "bad" then
      rec:phase("boom", h, function(ph) error("boom\nsecond line") end)
    elseif arg[1] == "badnote" then
      rec:phase("note", h, function(ph) ph:note("f", print) end)
    elseif arg[1] == "badeffect" then
      rec:expect("an effect", print, "asserted", true)
    elseif arg[1] == "nested" then
      local ok, err = pcall(rec.phase, rec, "outer", h, function(ph)
        ph:mark("drop")
        rec:phase("inner", h, function() end)
      end)
      assert(not ok)
      rec:phase("after", h, function() end)     -- nothing was left open
    elseif arg[1] == "badname" then
      for i, n in ipairs({false, 3, ""}) do
        local ok, err = pcall(rec.phase, rec, n, h, function() end)
        rec:note("name" .. i, ok and "taken" or tostring(err))
      end
      rec:phase(nil, h, function() end)         -- fails the arm, clearly
    end
    h:close()
  end,
}
"""


def _lua_arm(tmp_path, arm):
    """Run the Lua script above as `arm`: (exit status, arm JSON, stderr)."""
    import shutil
    lua = shutil.which("lua5.4")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    build = os.environ.get("HEAPLAB_BUILD") or os.path.join(root, "build")
    so = os.path.join(build, "bindings", "lua")
    if lua is None or not os.path.exists(os.path.join(so, "heaplab.so")):
        pytest.fail(f"needs lua5.4 and the Lua module at {so}/heaplab.so (make build)")
    script = tmp_path / "t_lua_arm.lua"
    script.write_text(LUA_ARM)
    env = {**os.environ, "LUA_CPATH": os.path.join(so, "?.so") + ";;",
           "LUA_PATH": os.path.join(root, "experiments", "lua", "?.lua") + ";;",
           "MALLOC_PERTURB_": "0"}
    p = subprocess.run([lua, str(script), arm], capture_output=True, text=True, env=env,
                       timeout=120)
    try:
        data = json.loads(p.stdout)
    except ValueError:
        pytest.fail(f"arm {arm}: no arm JSON on stdout (exit {p.returncode}): "
                    f"{p.stdout[-500:]!r} {p.stderr[-1500:]!r}")
    return p.returncode, data, p.stderr


def test_a_lua_phase_that_raised_says_so_as_a_python_phase_does(tmp_path):
    """The Lua harness wrote no status on its phase records: a phase whose
    function raised looked like a measurement.  It now writes the Python
    harness's field: 'ok', or 'raised: <first line of the error>'."""
    from heaplab.harness import phase_status
    rc, data, _ = _lua_arm(tmp_path, "good")
    assert rc == 0 and data["error"] is None, data["error"]
    assert [(r["phase"], r.get("status")) for r in data["records"]] == [("fill", "ok")]
    rc, data, _ = _lua_arm(tmp_path, "bad")
    assert rc == 1 and "boom" in data["error"], (rc, data["error"])
    st = {r["phase"]: r.get("status") for r in data["records"]}
    assert st["fill"] == "ok", st
    assert st["boom"].startswith("raised: ") and st["boom"].endswith(": boom"), st
    assert phase_status(data["records"][1]) == st["boom"]
    # the analysis refuses it as it refuses a Python phase that raised
    hla = pytest.importorskip("heaplab.analysis")
    with pytest.raises(ValueError, match="raised: "):
        hla.records_frame(data)


def test_lua_phases_do_not_nest(tmp_path):
    """The Lua harness's rec:phase reset the arm's one sampler inside another
    phase, as the Python one did: refused the same way, the outer phase's
    record whole, later phases still run."""
    rc, data, _ = _lua_arm(tmp_path, "nested")
    assert rc == 0 and data["error"] is None, (rc, data["error"])
    recs = {r["phase"]: r for r in data["records"]}
    assert list(recs) == ["fill", "outer", "after"], list(recs)
    st = recs["outer"]["status"]
    assert 'phase "inner" begun inside phase "outer"' in st, st
    assert recs["outer"]["phys_low_after_mark"] > 0, recs["outer"]


def test_a_lua_phase_name_that_is_no_string_is_a_lua_error_at_the_call(tmp_path):
    """rec:phase(nil), rec:phase(3) and rec:phase("") were taken by the Lua
    harness (the Python one refuses them since 36414b5): the arm's JSON had a
    record without a phase name, or a number for one.  They are Lua errors
    at the call, with the Python harness's messages; no record is made."""
    rc, data, stderr = _lua_arm(tmp_path, "badname")
    assert rc == 1, (rc, stderr[-500:])
    assert [r["phase"] for r in data["records"]] == ["fill"], data["records"]
    assert data["notes"] == {"name1": "a phase's name must be a string, not boolean false",
                             "name2": "a phase's name must be a string, not number 3",
                             "name3": "a phase's name must not be empty"}, data["notes"]
    assert "a phase's name must be a string, not nil nil" in data["error"], data["error"]
    assert re.search(r"t_lua_arm.lua:\d+: a phase.s name", data["error"]), data["error"]  # the caller


def test_a_lua_note_that_is_not_json_ends_the_phase_not_the_arm_document(tmp_path):
    """A note the Lua harness could not encode (a function) made H.main's
    encoder raise after the arm ran: no arm JSON at all on stdout.  The note
    is refused when it is made, naming its key, as the Python harness's
    note() does; the phase says it raised and the arm's JSON is written."""
    rc, data, stderr = _lua_arm(tmp_path, "badnote")
    assert rc == 1, rc
    st = {r["phase"]: r.get("status") for r in data["records"]}
    assert st["fill"] == "ok" and st["note"].startswith("raised: "), st
    assert "note 'f'" in st["note"] and "JSON" in st["note"], st
    assert "note 'f'" in data["error"]
    # anything else the encoder cannot hold is written as null (or []), and
    # the arm fails saying so: its JSON is still printed
    rc, data, stderr = _lua_arm(tmp_path, "badeffect")
    assert rc == 1 and data["effects"] == [], (rc, data["effects"])
    assert "cannot encode the arm's JSON" in data["error"] and '"effects"' in data["error"]
    assert [r["status"] for r in data["records"]] == ["ok"]


# ---- 3. a command arm's script that never returns -------------------------------------------

STUCK = """
import json, os, sys, threading, time
import heaplab.harness as hh
from heaplab.harness import run_command_arm
tmp, how = sys.argv[1], sys.argv[2]
# (the grace a blocked script's thread gets after the deadline: 1 s, not
# the default 2 -- the blocked case's time; the head start, 0.5 s, is in it)
hh._SCRIPT_GRACE_S = 1.0
def script(ctl):
    with open(os.path.join(tmp, "pid.tmp"), "w") as f:
        f.write(str(ctl.pid))
    os.rename(os.path.join(tmp, "pid.tmp"), os.path.join(tmp, "pid"))
    with ctl.phase("first"):
        pass
    with ctl.phase("stuck"):
        if how == "loop":           # a Python loop that never calls the harness
            while True:
                time.sleep(0.01)
        elif how == "wait_low":     # the harness's own helper, asked for an hour
            ctl.wait_low(3600, settle_s=3600)
        else:                       # blocked in a C call that never returns
            threading.Event().wait()
    ctl.note("after", True)
t0 = time.monotonic()
data = run_command_arm(["sleep", "120"], allocator="glibc", script=script, timeout=1)
alive = [t.name for t in threading.enumerate() if t.name.startswith("heaplab script")]
print(json.dumps({"seconds": time.monotonic() - t0, "error": data["error"], "alive": alive,
                  "records": [(r["phase"], r["status"]) for r in data["records"]],
                  "notes": data["notes"]}))
"""


SLOW_EXIT = """
import json, sys, time
import heaplab.harness as hh
from heaplab.harness import run_command_arm
real = hh._read_rollup
state = {}
def slow(pid):
    if state.get("late"):
        # a loaded machine: the phase's last sample ends just after the
        # deadline (waited for, not guessed: the deadline passes inside it)
        while state["ctl"].remaining() > 0:
            time.sleep(0.005)
        time.sleep(0.05)
    return real(pid)
hh._read_rollup = slow
def script(ctl):
    state["ctl"] = ctl
    with ctl.phase("first"):
        pass
    with ctl.phase("late"):
        while ctl.remaining() > 0.05:
            time.sleep(0.01)
        state["late"] = True     # the phase ends on its own, just before the deadline
        raise RuntimeError("gave up")
data = run_command_arm(["sleep", "120"], allocator="glibc", script=script, timeout=1)
print(json.dumps({"records": [(r["phase"], r["status"]) for r in data["records"]],
                  "error": data["error"]}))
"""


def test_a_phase_ending_at_the_timeout_keeps_its_record(tmp_path):
    """A script whose phase was unwinding when the arm's timeout came lost
    that phase's record: the harness raised ArmTimeout into the script's
    thread at once, inside the phase's exit, before it appended its record
    (the fresh-clone CI of 6fec49c: test_a_script_that_never_returns_is_
    bounded_by_timeout[wait_low] found [first] where [first, stuck] were
    due).  Now the thread gets a moment to stop on its own first."""
    p = subprocess.run([sys.executable, "-c", SLOW_EXIT], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    # the deadline came while the phase was ending (else this tests nothing)
    assert "the script was still running after the arm's timeout (1 s)" in out["error"], out
    assert out["records"] == [["first", "ok"], ["late", "raised: RuntimeError: gave up"]], out


@pytest.mark.parametrize("how", ["loop", "wait_low", "blocked"])
def test_a_script_that_never_returns_is_bounded_by_timeout(tmp_path, how):
    """run_command_arm(..., script=s, timeout=T) bounded the command by T
    only after the script returned: a script that never did (a loop, a
    wait on something else, wait_low asked for an hour) hung the arm, and
    the command with it, for ever."""
    p = subprocess.Popen([sys.executable, "-c", STUCK, str(tmp_path), how],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = None
    try:
        pid = int(wait_for_file(tmp_path / "pid", p))
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"{how}: still running 60 s after a 1 s timeout") from None
        assert p.returncode == 0, err[-3000:]
        res = json.loads(out)
        assert res["seconds"] < 1 + 5, res
        assert "the script was still running after the arm's timeout (1 s): the command was " \
               "killed" in res["error"], res
        assert gone(pid), f"{how}: the command {pid} outlived the timeout"
        assert res["notes"] == {}, res
        if how == "blocked":
            # a thread blocked in C cannot be stopped from outside: said, not hidden
            assert "did not stop within 1 s" in res["error"] and res["alive"], res
            assert res["records"] == [["first", "ok"]], res
        else:
            assert "the script stopped (ArmTimeout)" in res["error"] and not res["alive"], res
            assert res["records"] == [["first", "ok"], [
                "stuck", "raised: ArmTimeout: the arm's timeout (1 s) expired"]], res
    finally:
        reap(p, pid)


def test_a_blocked_script_gets_the_grace_the_error_names(monkeypatch):
    """After the deadline a script's thread gets _SCRIPT_GRACE_S in all, the
    figure the error names ("did not stop within 2 s" by default): 2c8cdd2's head start
    (0.5 s to stop by itself before ArmTimeout is raised) came on top of it,
    2.5 s.  The waits are read off the caller's waits for the script's
    thread to end (harness._Finished: an interrupted Thread.join marks the
    thread stopped), not timed.  (The grace set to 1 s, the head start's
    0.5 s in it, and the arm's timeout 0.5 s: the test's time.)"""
    import threading
    import heaplab.harness as hh
    from heaplab.harness import run_command_arm
    monkeypatch.setattr(hh, "_SCRIPT_GRACE_S", 1.0)
    assert hh._SCRIPT_HEAD_START_S < hh._SCRIPT_GRACE_S
    waits = []
    real_wait = hh._Finished.wait

    def wait(self, timeout):
        waits.append(timeout)
        return real_wait(self, timeout)
    monkeypatch.setattr(hh._Finished, "wait", wait)
    release = threading.Event()

    def script(ctl):
        with ctl.phase("first"):
            pass
        release.wait(30)                # blocked in C: ArmTimeout cannot land

    try:
        data = run_command_arm(["sleep", "60"], allocator="glibc", script=script, timeout=0.5)
    finally:
        release.set()
    assert f"did not stop within {hh._SCRIPT_GRACE_S:g} s" in data["error"], data["error"]
    assert len(waits) >= 2, waits
    assert sum(waits[1:]) == pytest.approx(hh._SCRIPT_GRACE_S), waits


# a command that ignores SIGTERM (run_command_arm's default stop signal)
_DEAF = ["sh", "-c", "trap '' TERM; exec sleep 60"]


@pytest.mark.parametrize("stop_signal", [signal.SIGTERM, None])
def test_a_command_without_a_script_is_killed_at_its_timeout(stop_signal):
    """Without a script, a command still running at `timeout` got the stop
    signal only then and was killed 5 s later -- timeout=1 returned after
    6 s -- while the error said "still running after 1 s: killed".  The
    whole run is the arm: it is killed at the timeout, as the docs say."""
    t0 = time.monotonic()
    data = run_command_arm(_DEAF, allocator="glibc", timeout=1, stop_signal=stop_signal)
    took = time.monotonic() - t0
    assert data["error"].endswith("still running at the arm's timeout (1 s): killed"), \
        data["error"]
    assert data["returncode"] == -signal.SIGKILL, data["returncode"]
    # (the stop signal's 5 s grace would make it 6 s; 3 s of slack for a loaded machine)
    assert took < 1 + 3, took
    assert [r["phase"] for r in data["records"]] == ["run"]


def test_a_command_deaf_to_its_stop_signal_is_named(monkeypatch, tmp_path):
    """After the script, a command that does not end on its stop signal is
    killed _STOP_GRACE_S later (or at the deadline, if that is later): the
    error said "still running after T s: killed", neither when it was
    signalled nor when it was killed."""
    import heaplab.harness as hh
    monkeypatch.setattr(hh, "_STOP_GRACE_S", 1.5, raising=False)
    ready = tmp_path / "ready"

    def script(ctl):
        with ctl.phase("p"):
            while not ready.exists() and ctl.remaining():   # its trap is set
                time.sleep(0.005)
    data = run_command_arm(["sh", "-c", f"trap '' TERM; touch {ready}; exec sleep 60"],
                           allocator="glibc", script=script, timeout=1)
    assert "still running 1.5 s after the stop signal (SIGTERM): killed at " in data["error"] \
        and "(the arm's timeout: 1 s)" in data["error"], data["error"]
    assert data["returncode"] == -signal.SIGKILL and [r["phase"] for r in data["records"]] \
        == ["p"], data


def test_the_script_helpers_refuse_to_start_after_the_deadline():
    from heaplab.harness import ArmTimeout
    seen = {}

    def script(ctl):
        seen["remaining"] = ctl.remaining()
        ctl.deadline = time.monotonic()     # (as if the time were up)
        try:
            with ctl.phase("late"):
                pass
        except ArmTimeout as e:
            seen["late"] = str(e)
    data = run_command_arm(["sleep", "30"], allocator="glibc", script=script, timeout=60)
    assert 0 < seen["remaining"] <= 60 and "timeout (60 s) expired" in seen["late"], seen
    assert data["records"] == [] and data["error"] is None, data["error"]


# ---- 4. Ctrl-C during Experiment.run ----------------------------------------------------------

SLOW = """
import os, subprocess, sys, time
from heaplab.harness import Experiment
T = Experiment("T", "a slow arm")
TMP = os.environ["RECORDS_TMP"]

@T.arm("slow")
def slow(rec, **options):
    with rec.phase("fill"):
        x = bytearray(1 << 20)
    with rec.phase("slow"):
        # something the arm started, as an arm's server or tool would
        child = subprocess.Popen(["sleep", "300"])
        with open(os.path.join(TMP, "pids.tmp"), "w") as f:
            f.write(f"{os.getpid()} {child.pid}")
        os.rename(os.path.join(TMP, "pids.tmp"), os.path.join(TMP, "pids"))
        while True:
            time.sleep(0.01)

if __name__ == "__main__":
    import importlib
    mod = importlib.import_module("records_slow")
    try:
        mod.T.run()
        print("returned")
    except KeyboardInterrupt:
        print("KeyboardInterrupt")
"""


@pytest.mark.parametrize("to", ["pid", "group"])
def test_ctrl_c_during_experiment_run_leaves_no_arm_process_and_an_interrupted_record(
        tmp_path, to):
    """Ctrl-C in Experiment.run (SIGINT to the runner alone, or to its
    process group as a terminal sends it): subprocess.run killed the arm's
    process but not what the arm had started (a `sleep 300` outlived it),
    and no record of the interrupted arm was written -- an earlier run's
    complete record of the arm stood for it in results/ and records.csv."""
    (tmp_path / "records_slow.py").write_text(SLOW)
    results = tmp_path / "results"
    # an earlier, complete run of the arm
    save_arm(_arm("slow", [_record("fill", 0, "ok")]) | {"experiment": "T"}, str(results))
    env = dict(os.environ, RECORDS_TMP=str(tmp_path), HEAPLAB_RESULTS=str(results),
               PYTHONPATH=os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, str(tmp_path / "records_slow.py")], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    pids = []
    try:
        pids = [int(x) for x in wait_for_file(tmp_path / "pids", p).split()]
        assert not any(gone(x) for x in pids)
        if to == "pid":
            p.send_signal(signal.SIGINT)
        else:
            os.killpg(p.pid, signal.SIGINT)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running 30 s after the Ctrl-C") from None
        assert out.strip() == "KeyboardInterrupt", (out, err[-3000:])
        for x in pids:
            assert gone(x), f"process {x} of the arm outlived the Ctrl-C ({pids})"
        data = json.loads((results / "T" / "slow.json").read_text())
        assert data.get("interrupted") is True and "interrupted (KeyboardInterrupt)" in \
            data["error"], data.get("error")
        assert data["pid"] == pids[0]
        assert [(r["phase"], r["status"]) for r in data["records"]] == [
            ("fill", "ok"), ("slow", "raised: KeyboardInterrupt")], data["records"]
        rows = _read_csv(results / "T" / "records.csv")
        assert [(r["phase"], r["status"]) for r in rows] == [
            ("fill", "ok"), ("slow", "raised: KeyboardInterrupt")], rows
        assert all("interrupted (KeyboardInterrupt)" in r["arm_error"] for r in rows), rows
    finally:
        reap(p, *pids, group=True)


def test_an_arm_past_its_timeout_leaves_a_failed_record(tmp_path, monkeypatch):
    """An arm that ran past Experiment.run's timeout raised ArmFailed and
    wrote nothing: an earlier run's complete record of it stood."""
    (tmp_path / "records_slow2.py").write_text(SLOW)
    monkeypatch.setenv("RECORDS_TMP", str(tmp_path))
    monkeypatch.setenv("HEAPLAB_RESULTS", str(tmp_path / "results"))
    save_arm(_arm("slow", [_record("fill", 0, "ok")]) | {"experiment": "T"},
             str(tmp_path / "results"))
    import importlib.util
    spec = importlib.util.spec_from_file_location("records_slow2", tmp_path / "records_slow2.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["records_slow2"] = mod
    try:
        spec.loader.exec_module(mod)
        with pytest.raises(ArmFailed, match="no result within 3.0 s"):
            mod.T.run(timeout=3)
    finally:
        del sys.modules["records_slow2"]
    pids = [int(x) for x in (tmp_path / "pids").read_text().split()]
    left = [x for x in pids if not gone(x)]
    for x in left:
        os.kill(x, signal.SIGKILL)
    assert not left, f"processes {left} of the arm outlived its timeout ({pids})"
    data = json.loads((tmp_path / "results" / "T" / "slow.json").read_text())
    assert "no result within 3.0 s" in data["error"] and data["records"] == [], data


LINGER = """
import os, subprocess, sys
from heaplab.harness import Experiment
T = Experiment("T", "an arm that leaves a helper running")

@T.arm("a")
def arm(rec, **options):
    with rec.phase("work"):
        # a helper the arm does not wait for: it holds the arm's stderr (and
        # stdout, which the child points at stderr)
        h = subprocess.Popen(["sleep", "300"])
        # one that left the arm's process group, holding them too
        o = subprocess.Popen(["sleep", "301"], start_new_session=True)
    with open(os.path.join(os.environ["RECORDS_TMP"], "helpers"), "w") as f:
        f.write(f"{h.pid} {o.pid}")
"""


def test_an_arm_that_leaves_a_helper_running_keeps_its_records(tmp_path, monkeypatch):
    """Experiment.run read the arm's pipes to their end (communicate): a
    helper the arm started and left running held them, so the run waited
    the whole timeout, lost the arm's records (ArmFailed: no result) and
    left the helper running -- though each arm's process group is promised
    to be stopped with it.  Now the arm's process is waited for, its group
    killed, and what is left in the pipes read (a process that left the
    group gets _DRAIN_S)."""
    (tmp_path / "records_linger.py").write_text(LINGER)
    monkeypatch.setenv("RECORDS_TMP", str(tmp_path))
    monkeypatch.setenv("HEAPLAB_RESULTS", str(tmp_path / "results"))
    import importlib.util
    spec = importlib.util.spec_from_file_location("records_linger", tmp_path / "records_linger.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["records_linger"] = mod
    pids = []
    try:
        spec.loader.exec_module(mod)
        t0 = time.monotonic()
        res = mod.T.run(timeout=8)
        took = time.monotonic() - t0
        pids = [int(x) for x in (tmp_path / "helpers").read_text().split()]
        assert [r["phase"] for r in res["a"].records] == ["work"], res["a"].data
        assert took < 8, took
        # (SIGKILLed: its pipes close before /proc shows it a zombie)
        deadline = time.monotonic() + 30
        while not gone(pids[0]) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gone(pids[0]), f"the helper {pids[0]} in the arm's group outlived the arm"
    finally:
        del sys.modules["records_linger"]
        for x in pids:
            if not gone(x):
                os.kill(x, signal.SIGKILL)


# A child that prints bytes that are not UTF-8 (a C library's message, a Lua
# error carrying binary data) made run_command_arm and the sweep's run_task
# raise UnicodeDecodeError and lose the arm's records.
_STRAY_BYTES_ARM = textwrap.dedent("""
    import json, sys
    sys.stderr.buffer.write(b"warning: \\xff\\xfe not utf-8\\n")
    sys.stderr.flush()
    print(json.dumps({"experiment": "X", "title": "", "arm": "a", "options": {}, "params": {},
                      "records": [{"phase": "p", "status": "ok"}], "notes": {}, "series": []}))
""")


def test_stray_bytes_on_stderr_keep_the_arms_records(tmp_path):
    from heaplab.sweep import run_task
    prog = tmp_path / "arm.py"
    prog.write_text(_STRAY_BYTES_ARM)
    data = run_command_arm([sys.executable, str(prog)])
    assert data["records"] == [{"phase": "p", "status": "ok"}]
    assert "\ufffd" in data["stderr_tail"] and "not utf-8" in data["stderr_tail"]
    rec = run_task({"kind": "argv", "argv": [sys.executable, str(prog)], "arm": "a",
                    "experiment": "X", "key": "k", "cell": "c", "values": {}, "repeat": 0})
    assert rec["sweep"]["status"] == "ok", rec["sweep"]["error"]
    assert rec["records"] == [{"phase": "p", "status": "ok"}]
    assert "\ufffd" in rec["sweep"]["stderr_tail"]


def test_results_folders_linked_in_are_read_once(tmp_path):
    """An experiment folder that is a symbolic link was left out of a results
    folder without a word (os.walk follows no link): it is read, each real
    folder once -- a link to a folder already read, or a loop of links, adds
    nothing and ends."""
    def arm_json(folder, experiment, arm):
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, f"{arm}.json"), "w") as f:
            json.dump({"experiment": experiment, "arm": arm, "records": []}, f)

    elsewhere = tmp_path / "elsewhere" / "E1"
    arm_json(str(elsewhere), "E1", "on")
    results = tmp_path / "results"
    arm_json(str(results / "E5"), "E5", "off")
    os.symlink(elsewhere, results / "E1")
    os.symlink(results / "E5", results / "E5again")       # the same folder twice
    os.symlink(results, results / "E5" / "loop")           # a loop
    got = sorted((a["experiment"], a["arm"]) for a in load_arms(str(results)))
    assert got == [("E1", "on"), ("E5", "off")], got


_LANDS_AT_EACH_CHECK = r'''
import dis, sys, threading, time
import heaplab.harness as hh
hh._SCRIPT_GRACE_S, hh._SCRIPT_HEAD_START_S = 0.4, 0.1

class Landed(Exception):
    pass

threading.excepthook = lambda args: None      # (one landing after the thread's last call)
after_call = {}

def lands_here(code, offset):
    if code not in after_call:
        ins = list(dis.get_instructions(code))
        after_call[code] = {b.offset for a, b in zip(ins, ins[1:]) if a.opname == "CALL"}
    return offset in after_call[code]

def run(k):
    seen, ends = [0], [None]

    def check():                     # one of CPython's checks for a raised exception
        seen[0] += 1
        if seen[0] == k + 1:
            raise Landed(k)

    def local(frame, event, arg):
        if event == "opcode" and lands_here(frame.f_code, frame.f_lasti):
            check()
        elif event == "return" and frame is ends[0]:
            sys.settrace(None)       # (the thread's own step is over: threading's code follows)
        return local

    def new_frame(frame, event, arg):
        frame.f_trace_opcodes = True
        check()                      # (a new Python frame checks as it starts)
        return local

    def script(ctl):
        target = ends[0] = sys._getframe(1)    # the harness's frame that called the script
        target.f_trace, target.f_trace_opcodes = local, True
        sys.settrace(new_frame)

    t0 = time.monotonic()
    data = hh.run_command_arm(["sleep", "60"], allocator="glibc", script=script, timeout=20)
    # the script's end raced the exception: either it is the script's, or the
    # script ended -- and the caller saw it end (not the arm's deadline, 20 s)
    if data["error"] is not None and "Landed" not in data["error"].splitlines()[-1]:
        sys.exit(f"raising at check {k}: {data['error']}")
    if time.monotonic() - t0 > 10:
        sys.exit(f"raising at check {k}: the script's end was not seen before the deadline")
    return seen[0] > k                # False: no check was left to land in

k = 0
while True:
    print("raising at check", k, flush=True)
    if not run(k):
        break
    k += 1
print("landed at", k, "checks")
'''


def test_an_exception_raised_into_a_script_as_it_ends_never_blocks_the_arm(tmp_path):
    """stop() raises ArmTimeout or KeyboardInterrupt into a script's thread
    with _async_raise, and the thread can be ending just then.  It used to
    tell the caller through a threading.Event, whose set() takes the event's
    lock in Python code: an exception landing as Condition.__enter__
    returned (right after that lock was taken) left the lock held, and the
    caller's next wait on the event blocked for ever.  An exception raised
    into a thread lands where CPython checks for one -- after a call, at the
    start of a Python frame -- so the test raises one at each such point
    from the script's return to the thread's last step (sys.settrace with
    opcode events), one run per point: every run must come back, at once and
    with the script either ended or failed by that exception.  On the code
    before, the run that raised as Condition.__enter__ returned never did.""" 
    try:
        r = subprocess.run([sys.executable, "-c", _LANDS_AT_EACH_CHECK], capture_output=True,
                           text=True, timeout=90)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        pytest.fail(f"a run never came back: {out.splitlines()[-1:]} (of {out!r})")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"\nlanded at [1-9]\d* checks\n\Z", r.stdout), r.stdout + r.stderr
