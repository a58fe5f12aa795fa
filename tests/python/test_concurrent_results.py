"""One results folder used by several processes at once (session 27's
hunt): a sweep's run folder inside the suite's results, `heaplab report
RESULTS/latest` while a sweep starts, a reader while Experiment.run saves,
two savers of one experiment's records.csv.  The interleavings are forced
with hooks and monkeypatching, not hoped for: no timing."""
import csv
import json
import os

import pytest

from heaplab import analysis as hla
from heaplab import harness
from heaplab.harness import FIGURES, load_arms, save_arm

pytestmark = pytest.mark.shares_the_machine

MiB = 1 << 20


def _arm(experiment, name, value, series=True):
    rec = {"experiment": experiment, "arm": name, "phase": "fill", "index": 0,
           "t_start_s": 0.0, "t_end_s": 0.1, **{k: value for k in FIGURES}}
    return {"experiment": experiment, "title": "t", "arm": name, "options": {}, "params": {},
            "pid": 1, "error": None, "records": [rec], "notes": {},
            "series": [[0.01 * i, value + i * MiB, value + i * MiB, 0] for i in range(8)]
            if series else []}


def _sweep_run(results, run_id, value):
    """A sweep's run folder as heaplab run leaves it: meta.json and task records
    <exp>/c000/<arm>.r<k>.json (the arm's JSON + "sweep")."""
    run = results / run_id
    (run / "E1" / "c000").mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({"run_id": run_id, "experiment": "e1"}))
    for k in range(2):
        d = dict(_arm("E1", "on", value), repeat=k,
                 sweep={"experiment": "E1", "cell": "c000", "arm": "on", "status": "ok",
                        "repeat": k, "values": {"warm_pages": "0"}})
        (run / "E1" / "c000" / f"on.r{k}.json").write_text(json.dumps(d))
    return run


def test_a_sweep_run_in_the_results_folder_is_not_the_suites_records(tmp_path):
    """`heaplab report results` counted a sweep's task records
    (results/<run-id>/E1/c000/on.r0.json) as repeats of the suite's own
    results/E1/on.json: its tables mixed the two.  A run folder below the
    folder is left out, and one line names it and how to report it."""
    results = tmp_path / "results"
    save_arm(_arm("E1", "on", 16 * MiB), str(results))
    run = _sweep_run(results, "20261205-170000-abcdef", 8 * MiB)
    os.symlink(run.name, results / "latest")
    found = load_arms(str(results))
    assert [(a["arm"], a.get("repeat")) for a in found] == [("on", None)], found
    assert harness.sweep_runs_under(str(results)) == [str(run)]
    # the run itself is still read when named
    assert len(load_arms(str(run))) == 2
    said = []
    hla.report(str(results), log=said.append)
    rows = list(csv.DictReader(open(results / "report" / "E1_records.csv")))
    assert {r["repeat"] for r in rows} == {""}, rows
    assert {float(r["value"]) for r in rows if r["figure"] == "phys_before"} == {16 * MiB}
    left = [m for m in said if "left out" in m]
    assert len(left) == 1 and str(run) in left[0] and f"heaplab report {run}" in left[0], said
    # a folder of runs only: the error says where the records are
    only = tmp_path / "only"
    only.mkdir()
    run2 = _sweep_run(only, "20261205-170001-abcdef", 8 * MiB)
    with pytest.raises(ValueError, match=f"no arm results.*heaplab report {run2}"):
        hla.arms(str(only))


def _reportable_run(results, run_id, value):
    """A sweep run folder report_run can report: a grid, task records with
    effects."""
    run = results / run_id
    (run / "E1" / "c000").mkdir(parents=True)
    (run / "meta.json").write_text(json.dumps({
        "run_id": run_id, "experiment": "e1", "grid": {"warm_pages": ["0"]},
        "cells": {"c000": {"warm_pages": "0"}}}))
    for arm in ("on", "off"):
        for k in range(2):
            d = dict(_arm("E1", arm, value + k * MiB), repeat=k,
                     sweep={"experiment": "E1", "cell": "c000", "arm": arm, "status": "ok",
                            "repeat": k, "values": {"warm_pages": "0"}},
                     effects_numeric=[{"effect": "returned", "value": value + k, "unit": "MiB",
                                       "threshold": 1, "passed": True}])
            (run / "E1" / "c000" / f"{arm}.r{k}.json").write_text(json.dumps(d))
    return run


@pytest.mark.parametrize("b_has_report", [False, True])
def test_report_of_latest_is_the_run_latest_named_when_it_began(tmp_path, b_has_report):
    """`heaplab report RESULTS/latest` read the link again at every read and
    write: a sweep starting meanwhile (it points latest at its new run) made
    it crash (FileNotFoundError, a .tmp left) or write run A's tables into
    run B's report/.  The move is forced after the report's first file."""
    from heaplab import sweep
    results = tmp_path / "results"
    a = _reportable_run(results, "20261205-000001-aaaaaa", 10 * MiB)
    b = _reportable_run(results, "20261205-000002-bbbbbb", 20 * MiB)
    if b_has_report:
        hla.report_run(str(b))
    before_b = {n: (b / "report" / n).read_bytes() for n in os.listdir(b / "report")} \
        if b_has_report else None
    sweep._point_latest(str(results), a.name)
    said = []

    def hook(msg):
        said.append(msg)
        if len(said) == 1:
            sweep._point_latest(str(results), b.name)     # a new sweep starts now
    written = hla.report_run(str(results / "latest"), log=hook)
    assert all(p.startswith(str(a / "report")) for p in written), written
    assert (a / "report" / "effects.csv").read_text() == \
        hla.effects_frame(str(a)).to_csv(index=False)
    if b_has_report:
        assert {n: (b / "report" / n).read_bytes() for n in os.listdir(b / "report")} == before_b
    else:
        assert not (b / "report").exists()
    tmps = [n for d in (a, b) if (d / "report").exists() for n in os.listdir(d / "report")
            if n.endswith(".tmp")]
    assert tmps == []


def test_write_atomic_through_a_link_that_moves_writes_one_folder(tmp_path, monkeypatch):
    """write_atomic made its temporary file through the link and renamed it
    through the link again: re-pointed in between, the rename found no such
    file (FileNotFoundError) and the .tmp stayed behind."""
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    link = tmp_path / "latest"
    os.symlink("one", link)
    real_fsync = os.fsync

    def fsync_then_move(fd):
        real_fsync(fd)
        os.remove(link)
        os.symlink("two", link)
    monkeypatch.setattr(harness.os, "fsync", fsync_then_move)
    harness.write_atomic(str(link / "t.csv"), "x\n")
    monkeypatch.undo()
    assert os.listdir(one) == ["t.csv"] and os.listdir(two) == []


def test_report_says_an_os_error_in_one_line(tmp_path, monkeypatch, capsys):
    """An OSError in the report (a file gone or unwritable meanwhile) was a
    traceback: one line naming it, exit 1."""
    from heaplab import __main__ as cli
    save_arm(_arm("E1", "on", 16 * MiB), str(tmp_path))

    def gone(*args, **kw):
        raise FileNotFoundError(2, "No such file or directory", str(tmp_path / "E1" / "on.json"))
    monkeypatch.setattr(hla, "report", gone)
    assert cli.main(["report", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("heaplab report: ") and "on.json" in err, err


TINY = """
from heaplab.harness import Experiment
T = Experiment("TCONC", "concurrent saves")

@T.arm("a")
@T.arm("b")
def arm(rec, **options):
    with rec.phase("fill"):
        x = bytearray(1 << 16)
"""


@pytest.fixture
def tiny(experiment_source, tmp_path):
    return experiment_source("tconc_exp", TINY).T, tmp_path / "results" / "TCONC"


@pytest.mark.parametrize("first,then", [(1, 1), (3, 1), (1, 2)])
def test_a_reader_never_misses_an_arm_while_run_saves_it(tiny, monkeypatch, first, then):
    """Experiment.run removed <arm>.json (with its earlier runs) and then
    wrote it again: a reader in between found no such file -- load_arms
    raised 'cannot be read ... remove it' about a healthy file, or the
    table was short of the arm.  A reader is run at every write_atomic of an
    arm's JSON and every os.remove of Experiment.run's saving."""
    exp, folder = tiny
    exp.run(repeat=first)
    seen = []

    def reader(when):
        arms = sorted({a["arm"] for a in load_arms(str(folder))})
        seen.append((when, arms))
    real_write, real_remove = harness.write_atomic, harness.os.remove

    def write_atomic(path, text):
        reader(f"before writing {os.path.basename(path)}")
        real_write(path, text)
        reader(f"after writing {os.path.basename(path)}")

    def remove(path):
        reader(f"before removing {os.path.basename(path)}")
        real_remove(path)
        reader(f"after removing {os.path.basename(path)}")
    monkeypatch.setattr(harness, "write_atomic", write_atomic)
    monkeypatch.setattr(harness.os, "remove", remove)
    try:
        exp.run(repeat=then)
    finally:
        monkeypatch.undo()
    assert seen and all(arms == ["a", "b"] for _, arms in seen), seen
    stems = ["a.json", "b.json"] if then == 1 else \
        [f"{a}.r{k}.json" for a in "ab" for k in range(then)]
    assert sorted(n for n in os.listdir(folder) if n.endswith(".json")) == stems
    rows = list(csv.DictReader(open(folder / "records.csv")))
    assert len(rows) == 2 * then, rows


@pytest.mark.parametrize("a_writes", ["save_arm", "write_csv"])
def test_records_csv_keeps_both_arms_saved_at_the_same_moment(tmp_path, monkeypatch, a_writes):
    """Two processes saving arms of one experiment at once (pytest -n 2: the
    Python and the Lua E1 both write results/E1): write_csv listed the
    folder, then replaced records.csv -- the last to write won with a
    listing that missed the other's new arm.  Forced here: A stops right
    after its listing while B saves; when the folder's lock is held (the
    fix) B cannot save meanwhile, so A does not wait for it."""
    import fcntl
    import threading
    for name in ("a", "b"):
        save_arm(_arm("EX", name, 1), str(tmp_path))           # an earlier run of both
    folder = str(tmp_path / "EX")
    a_listed, b_done = threading.Event(), threading.Event()
    real = harness._arm_files
    waited, errors = [], []

    def listing(*args, **kw):
        out = list(real(*args, **kw))
        if threading.current_thread().name == "A":
            a_listed.set()
            # (O_CREAT: without the fix no lock file is ever made -- an open
            # without it raised in A, and the test passed: the review)
            fd = os.open(os.path.join(folder, ".records.lock"), os.O_RDONLY | os.O_CREAT, 0o666)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pass                    # A holds the lock: B waits for it, not A for B
            else:
                waited.append(b_done.wait(60))     # nothing stops B: let it save in the gap
            finally:
                os.close(fd)
        return out
    monkeypatch.setattr(harness, "_arm_files", listing)

    def a():
        try:
            if a_writes == "save_arm":
                save_arm(_arm("EX", "a", 2), str(tmp_path))
            else:
                harness.write_csv(folder)
        except BaseException as e:      # (a thread's exception is only a warning to pytest)
            errors.append(e)

    def b():
        try:
            a_listed.wait()
            save_arm(_arm("EX", "b", 2), str(tmp_path))
        except BaseException as e:
            errors.append(e)
        finally:
            b_done.set()
    ta, tb = threading.Thread(target=a, name="A"), threading.Thread(target=b, name="B")
    ta.start()
    tb.start()
    ta.join()
    tb.join()
    assert errors == [] and all(waited), (errors, waited)
    rows = list(csv.DictReader(open(tmp_path / "EX" / "records.csv")))
    want = {"a": "2" if a_writes == "save_arm" else "1", "b": "2"}
    assert {r["arm"]: r["phys_before"] for r in rows} == want, rows


def test_two_sessions_of_one_experiment_never_leave_their_files_side_by_side(tiny, monkeypatch):
    """Two sessions ran the same experiment at once (two terminals, --repeat 3
    and a single run): the single run's files were left beside the other's
    <arm>.r<k>.json and records.csv took them for repeats of one run.
    Session S1 (repeat=3) is stopped after its first save; S2 (one run) then
    runs and saves -- or, when S1 holds the folder's lock (the fix), waits
    for it, saying so -- and S1 goes on.  The arms' processes are faked
    (run_command_arm): no process, no timing."""
    import threading
    exp, folder = tiny
    s1_saved_one, s2_done_or_waiting = threading.Event(), threading.Event()
    calls = {"S1": 0}

    def fake_run(cmd, env, timeout=None, label=None, drop=()):
        who = threading.current_thread().name
        if who == "S1":
            calls["S1"] += 1
            if calls["S1"] == 2:            # S1 has saved its first arm
                s1_saved_one.set()
                assert s2_done_or_waiting.wait(60)
        return dict(_arm("TCONC", cmd[-1], 1 if who == "S1" else 2), pid=who)
    monkeypatch.setattr(harness, "run_command_arm", fake_run)
    said = []
    real_waiting = getattr(harness, "_waiting_for_records", None)

    def waiting(who, where):
        said.append(where)
        s2_done_or_waiting.set()
        real_waiting(who, where)
    monkeypatch.setattr(harness, "_waiting_for_records", waiting, raising=False)
    errors = []

    def session(repeat, after=None):
        try:
            if after is not None:
                assert after.wait(60)
            exp.run(repeat=repeat)
        except BaseException as e:          # (shown by the assertion below)
            errors.append(e)
        finally:
            if threading.current_thread().name == "S2":
                s2_done_or_waiting.set()
    s1 = threading.Thread(target=session, args=(3,), name="S1")
    s2 = threading.Thread(target=session, args=(1, s1_saved_one), name="S2")
    s1.start()
    s2.start()
    s1.join()
    s2.join()
    assert errors == []
    files = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    pids = {json.load(open(folder / n))["pid"] for n in files}
    assert len(pids) == 1 and files in (["a.json", "b.json"],
                                        [f"{a}.r{k}.json" for a in "ab" for k in range(3)]), \
        [(n, json.load(open(folder / n))["pid"]) for n in files]
    rows = list(csv.DictReader(open(folder / "records.csv")))
    assert sorted((r["arm"], r["repeat"]) for r in rows) == sorted(
        (json.load(open(folder / n))["arm"], "" if len(files) == 2 else n.split(".r")[1][0])
        for n in files)
    assert said == [str(folder)]            # S2 said it waited for S1


ARM_SAVES = '''
from heaplab.harness import Experiment, save_arm

T = Experiment("ARMSAVES", "an arm that saves a side record of its own experiment")


@T.arm("first")
@T.arm("second")
def arm(rec, **options):
    with rec.phase("p"):
        save_arm({"experiment": "ARMSAVES", "title": "t", "arm": "side", "options": {},
                  "params": {}, "pid": 1, "error": None, "records": [], "notes": {},
                  "series": []})
'''


def test_an_arm_that_saves_into_its_own_experiment_is_not_held_up(run_experiment_source,
                                                                     monkeypatch):
    """42779a7 held the folder's records lock from a run's first save to its
    last: an arm's own save_arm into its experiment (its process the run's
    child) waited for it without a word, until the arm's timeout (the
    review, session 27).  The run holds a lock of its own (.run.lock); a
    save_arm takes only the records lock, around its save."""
    import heaplab.harness as hh
    real = hh.run_command_arm
    monkeypatch.setattr(hh, "run_command_arm",
                        lambda *a, **kw: real(*a, **dict(kw, timeout=20)))
    res = run_experiment_source("armsaves_exp", ARM_SAVES)
    assert set(res) == {"first", "second"}, res
    assert all(res[a].data.get("error") is None for a in res), res


def test_a_lock_file_this_process_cannot_write_still_locks(tmp_path):
    """records_lock opened its file O_RDWR: in a results folder shared by two
    users, the one who did not make .records.lock (0644, the other's) got
    EACCES and could not save (the second review, session 27).  flock needs
    no more than read access.  Root passes permission checks, so the file is
    made unwritable the way root cannot pass: a read-only bind mount of the
    folder, in a mount namespace of the test's own (unshare -m)."""
    import shutil
    import subprocess
    import sys
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a private read-only bind mount")
    d = tmp_path / "EX"
    d.mkdir()
    (d / ".records.lock").touch()
    code = ("import sys\nfrom heaplab.harness import records_lock\n"
            "with records_lock(sys.argv[1]):\n    print('locked')\n")
    script = (f"mount --bind {d} {d} && mount -o remount,bind,ro {d} && "
              f"exec {sys.executable} -c \"$0\" {d}")
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script, code],
                       capture_output=True, text=True, timeout=60)
    if "mount:" in p.stderr:
        pytest.skip(f"no private bind mount here: {p.stderr.strip()}")
    assert p.returncode == 0 and p.stdout.strip() == "locked", p.stdout + p.stderr
