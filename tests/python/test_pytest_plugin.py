"""heaplab's pytest plugin (heaplab.pytest_plugin): the `lab` fixture's
records and effects, and the tables it writes at the end of a session.  The
sessions under test run in a child pytest (its own process), against the
installed package, with HEAPLAB_RESULTS in a temporary folder."""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from heaplab.pytest_plugin import Lab
from procs import PYTEST

# no assertion here depends on the machine's load (no bounded wait, no sampled
# footprint): make test runs these beside the notebooks, the fuzzers and the
# soak (pyproject.toml's markers)
pytestmark = pytest.mark.shares_the_machine

MiB = 1 << 20

FAKE = '''
MiB = 1 << 20
def fake(exp, arm, phys_after, index=0, phase="fill"):
    return {"experiment": exp, "arm": arm, "records": [
        {"experiment": exp, "arm": arm, "phase": phase, "index": index,
         "phys_before": 0, "phys_after": phys_after * MiB, "phys_peak": phys_after * MiB,
         "phys_low_after_mark": None, "resident_after": None}]}
'''


def fake(exp, arm, phys_after, index=0, phase="fill"):
    return {"experiment": exp, "arm": arm, "records": [
        {"experiment": exp, "arm": arm, "phase": phase, "index": index,
         "phys_before": 0, "phys_after": phys_after * MiB, "phys_peak": phys_after * MiB,
         "phys_low_after_mark": None, "resident_after": None}]}


def run_session(tmp_path, source, *args, env=None, name="test_inner.py", target=None):
    """pytest on one test file (`source`, after fake()) in a child process --
    or on `target` (a folder holding it: a whole suite's session, which may be
    complete); returns (process, results folder)."""
    (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / name).write_text(FAKE + textwrap.dedent(source))
    results = tmp_path / "results"
    e = session_env(results, env)
    p = subprocess.run([*PYTEST, "-q", "-p", "no:cacheprovider", *args,
                        target or name], cwd=tmp_path, env=e, capture_output=True, text=True, timeout=120)
    return p, results


def session_env(results, env=None):
    """The environment of a child pytest session: its tables under results."""
    e = dict(os.environ, HEAPLAB_RESULTS=str(results))
    e.pop("PYTEST_XDIST_WORKER", None)
    e.update(env or {})
    return e


TABLES = ("table.txt", "effects.txt", "effects.json")


def complete_tables(tmp_path, source):
    """A complete session of source (run_session): (its results folder, the
    text of its three tables)."""
    p, results = run_session(tmp_path, source)
    assert p.returncode == 0, p.stdout + p.stderr
    return results, {n: (results / n).read_text() for n in TABLES}


def assert_kept(results, complete):
    """The three tables are still complete_tables' ones."""
    for n, text in complete.items():
        assert (results / n).read_text() == text, n


def table(results):
    """table.txt's rows as lists of cells."""
    return table_of(results / "table.txt")


def table_of(path):
    """A table file's rows as lists of cells (cut where the rule line has its '+');
    its first line -- what the table covers -- left out."""
    lines = path.read_text().splitlines()
    while lines and lines[0].startswith("heaplab:"):
        lines = lines[1:]
    cuts = [i for i, c in enumerate(lines[1]) if c == "+"]
    starts, ends = [0] + [c + 2 for c in cuts], [c - 1 for c in cuts] + [None]
    return [[line[a:b].strip() for a, b in zip(starts, ends)] for line in lines[2:]
            if not line.startswith("heaplab:")]


# ---- records and effects ----------------------------------------------------------------

def test_parametrized_tests_keep_their_own_records_and_effects(tmp_path):
    """lab.record kept one record per (experiment, arm, phase, index) for the
    whole session: test_param[20]'s and [30]'s records were dropped and their
    effects shown beside [10]'s numbers."""
    p, results = run_session(tmp_path, '''
        import pytest
        @pytest.mark.parametrize("size", [10, 20, 30])
        def test_param(lab, size):
            lab.record(fake("P", "on", size))
            lab.effect("P", f"size {size}", f"{size} MiB", ">= 0", arm="on", phase="fill", ok=True)

        SHARED = fake("S", "on", 7)
        def test_shared_a(lab):
            lab.record(SHARED)
        def test_shared_b(lab):
            lab.record(SHARED)       # the same results again: one row
            lab.effect("S", "shared", "7 MiB", ">= 0", arm="on", phase="fill", ok=True)
    ''')
    assert p.returncode == 0, p.stdout + p.stderr
    rows = table(results)
    got = [(r[0], r[4], r[8]) for r in rows]
    assert got == [("P", "10.0", "size 10: 10 MiB | >= 0 ok"),
                   ("P", "20.0", "size 20: 20 MiB | >= 0 ok"),
                   ("P", "30.0", "size 30: 30 MiB | >= 0 ok"),
                   ("S", "7.0", "shared: 7 MiB | >= 0 ok")], rows


def test_one_test_recording_twice_keeps_one_row():
    lab = Lab()
    lab.test = "t"
    lab.record(fake("E", "a", 1))
    lab.record(fake("E", "a", 2))        # the same phase again in the same test: kept once
    lab.effect("E", "x", "1", "1", arm="a", phase="fill", ok=True)
    rows = lab.table_rows()
    assert len(rows) == 1 and rows[0][4] == "1.0" and rows[0][8] == "x: 1 | 1 ok", rows


@pytest.mark.parametrize("kw, needle", [
    ({"ok": "yes"}, "ok must be True, False or None"),
    ({"ok": 1}, "ok must be True, False or None"),
    ({"ours": None}, "ours must be a string"),
    ({"asserted": [1]}, "asserted must be a string"),
    ({"arm": 3}, "arm must be a string"),
    ({"experiment": None}, "experiment must be a string"),
])
def test_effect_with_a_bad_argument_is_refused_at_the_call(kw, needle):
    lab = Lab()
    args = dict(experiment="E", what="w", ours="1", asserted="1")
    args.update(kw)
    with pytest.raises(TypeError, match=needle):
        lab.effect(**args)
    assert lab.effects == []
    lab.effect("E", "w", 3, 2.5, ok=True)           # Python numbers are taken
    assert json.loads(json.dumps(lab.effects))[0]["ours"] == 3


def test_numpy_values_are_refused_at_the_call():
    np = pytest.importorskip("numpy")
    lab = Lab()
    with pytest.raises(TypeError, match="ours must be a string.*numpy.int64"):
        lab.effect("E", "w", np.int64(3), ">= 1")
    with pytest.raises(TypeError, match="ok must be True, False or None.*numpy.bool"):
        lab.effect("E", "w", "3", ">= 1", ok=np.bool_(True))


def test_a_bad_effect_fails_its_test_and_the_tables_are_written(tmp_path):
    """ok="yes" and a numpy number were taken, then crashed pytest at the end
    of the session (KeyError in the table, TypeError in effects.json): the
    tables were lost.  Now the test that passes them fails, with the reason,
    and the session writes the other effects."""
    p, results = run_session(tmp_path, '''
        import numpy as np
        def test_a(lab):
            lab.effect("E", "good", "1", "1", ok=True)
        def test_b(lab):
            lab.effect("E", "ok is a string", "1", "1", ok="yes")
        def test_c(lab):
            lab.effect("E", "numpy ours", np.int64(3), ">= 1", ok=True)
    ''')
    assert p.returncode == 1, p.stdout + p.stderr
    assert "INTERNALERROR" not in p.stdout + p.stderr, p.stdout + p.stderr
    assert "2 failed, 1 passed" in p.stdout, p.stdout
    assert "ok must be True, False or None" in p.stdout and "ours must be a string" in p.stdout
    effects = json.loads((results / "effects.json").read_text())["effects"]
    assert [e["what"] for e in effects] == ["good"], effects


def test_the_effects_tables_say_fail_for_an_effect_that_did_not_hold(tmp_path):
    """ok=False is FAIL in the effects table (the terminal's and
    effects.txt) and in table.txt, ok=True ok, ok=None '-' (reported)."""
    p, results = run_session(tmp_path, '''
        def test_a(lab):
            lab.record(fake("E", "on", 10))
            lab.effect("E", "held", "1", "1", arm="on", phase="fill", ok=True)
            lab.effect("E", "missed", "0", ">= 1", arm="on", phase="fill", ok=False)
            lab.effect("E", "told", "5", "-", arm="on", phase="fill")
    ''')
    assert p.returncode == 0, p.stdout + p.stderr
    rows = table_of(results / "effects.txt")
    assert [(r[2], r[5]) for r in rows] == [("held", "ok"), ("missed", "FAIL"), ("told", "-")], rows
    assert [ln.split(" | ")[-1].strip() for ln in p.stdout.splitlines()
            if ln.startswith("E ") and " | " in ln] == ["ok", "FAIL", "-"], p.stdout
    cells = [r[8] for r in table(results)]
    assert cells == ["held: 1 | 1 ok", "missed: 0 | >= 1 FAIL", "told: 5 | -"], cells


# (-p no:hypothesispytest: as procs.PYTEST's child sessions)
TWICE = """
import os, sys, pytest
for k in (1, 2):
    code = pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", sys.argv[1]])
    with open(os.path.join(os.environ["HEAPLAB_RESULTS"], "effects.json")) as f:
        print("session", k, "effects", [e["what"] for e in __import__("json").load(f)["effects"]])
"""


def test_two_sessions_in_one_process_have_their_own_tables(tmp_path):
    """The Lab was a module global: pytest.main twice in one process wrote
    the first session's effects into the second session's tables."""
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "test_one.py").write_text(
        "def test_one(lab):\n    lab.effect('E', 'once', '1', '1', ok=True)\n")
    (tmp_path / "twice.py").write_text(TWICE)
    env = dict(os.environ, HEAPLAB_RESULTS=str(tmp_path / "results"))
    env.pop("PYTEST_XDIST_WORKER", None)
    p = subprocess.run([sys.executable, str(tmp_path / "twice.py"), str(tmp_path / "inner")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "session 1 effects ['once']" in p.stdout, p.stdout
    assert "session 2 effects ['once']" in p.stdout, p.stdout


REPEAT_TWICE = """
import os, sys, pytest
os.environ.pop("HEAPLAB_REPEAT", None)
pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--repeat", "3",
             sys.argv[1]])
print("after session 1:", os.environ.get("HEAPLAB_REPEAT"))
os.environ["HEAPLAB_REPEAT"] = "2"       # the caller's own, kept
pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "--repeat", "5",
             sys.argv[1]])
print("after session 2:", os.environ.get("HEAPLAB_REPEAT"))
"""


def test_repeat_is_the_sessions_own(tmp_path):
    """--repeat N set HEAPLAB_REPEAT for the rest of the process: a later
    session (or Experiment.run) in it without --repeat ran every arm N times.
    The variable is put back as it was when the session ends."""
    (tmp_path / "inner").mkdir()
    (tmp_path / "inner" / "test_one.py").write_text(
        "import os\ndef test_one():\n    print('in session:', os.environ['HEAPLAB_REPEAT'])\n")
    (tmp_path / "twice.py").write_text(REPEAT_TWICE)
    env = dict(os.environ, HEAPLAB_RESULTS=str(tmp_path / "results"))
    env.pop("PYTEST_XDIST_WORKER", None)
    p = subprocess.run([sys.executable, str(tmp_path / "twice.py"), str(tmp_path / "inner")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "after session 1: None" in p.stdout, p.stdout
    assert "after session 2: 2" in p.stdout, p.stdout


# each xdist worker's HEAPLAB_RESULTS a folder of its own: a table a worker
# wrote would be there
WORKER_RESULTS_CONFTEST = """
import os
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ["HEAPLAB_RESULTS"] += "-" + os.environ["PYTEST_XDIST_WORKER"]
"""


def header(results, name="table.txt"):
    """A table file's first line (what it covers) and effects.json's "session"."""
    first = (results / name).read_text().splitlines()[0]
    return first, json.loads((results / name.replace("table", "effects").replace(
        ".txt", ".json")).read_text())["session"]


def test_xdist_workers_send_their_lab_to_the_controller(tmp_path):
    """Under pytest-xdist every worker wrote table.txt, effects.txt and
    effects.json to the same folder: the last to end won, the tables held one
    worker's share.  A worker now writes nothing and hands its records and
    effects to the controller (workeroutput), which merges them
    (pytest_testnodedown) and writes the one set of tables.  A real `pytest
    -n 2` session; each worker's HEAPLAB_RESULTS is a folder of its own, where
    a table it wrote would be."""
    pytest.importorskip("xdist", reason="tools/setup.sh installs pytest-xdist")
    (tmp_path / "conftest.py").write_text(WORKER_RESULTS_CONFTEST)
    p, results = run_session(tmp_path, """
        import os, pytest
        @pytest.mark.parametrize("size", [10, 20, 30, 40, 50, 60])
        def test_param(lab, size):
            lab.record(fake("P", "on", size))
            lab.effect("P", f"size {size}", os.environ["PYTEST_XDIST_WORKER"], ">= 0",
                       arm="on", phase="fill", ok=True)
    """, "-n", "2", name="exp/test_inner.py", target="exp")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "6 passed" in p.stdout, p.stdout
    for worker in ("gw0", "gw1"):        # (made: the plugin checks it is writable)
        assert (tmp_path / f"results-{worker}").is_dir(), worker
        assert not list((tmp_path / f"results-{worker}").iterdir()), worker
    effects = json.loads((results / "effects.json").read_text())["effects"]
    # every test's effect, each test ran once, on one worker or the other: both ran some
    assert sorted(e["what"] for e in effects) == [f"size {n}" for n in (10, 20, 30, 40, 50, 60)]
    assert {e["ours"] for e in effects} == {"gw0", "gw1"}, effects
    by_size = {e["what"]: e["ours"] for e in effects}
    got = sorted((r[0], r[4], r[8]) for r in table(results))
    assert got == [("P", f"{n}.0", f"size {n}: {by_size[f'size {n}']} | >= 0 ok")
                   for n in (10, 20, 30, 40, 50, 60)], got
    assert p.stdout.count("heaplab effects") == 1, p.stdout
    first, session = header(results)
    assert first.startswith("heaplab: complete session ") and "6 of 6 collected tests ran" in first
    assert session["complete"] and session["tests"]["ran"] == 6, session


STOPPING = """
    import pytest
    def test_fail(lab):
        lab.effect("F", "fails", "0", ">= 1", ok=False)
        assert False
    @pytest.mark.parametrize("size", [10, 20, 30, 40, 50, 60])
    def test_param(lab, size):
        lab.record(fake("P", "on", size))
        lab.effect("P", f"size {size}", f"{size} MiB", ">= 0", arm="on", phase="fill", ok=True)
"""


def test_an_xdist_session_stopped_by_x_is_partial(tmp_path):
    """Under pytest-xdist the controller collects nothing: the tables counted
    only the tests that ran ('1 of 1 collected tests ran'), and xdist ends a
    -x / --maxfail session with its Interrupted, a KeyboardInterrupt (exit
    status 2), so its tables went to table.interrupted.txt as a Ctrl-C's,
    headed 'INTERRUPTED session'.  Now the workers' counts reach the
    controller and the stop is a partial session's, as without xdist.  (All
    tests in one file, --dist loadfile: one worker runs them, test_fail
    first, and -x stops it there.)"""
    pytest.importorskip("xdist", reason="tools/setup.sh installs pytest-xdist")
    p, results = run_session(tmp_path, STOPPING, "-n", "2", "--dist", "loadfile", "-x",
                             name="exp/test_inner.py", target="exp")
    assert p.returncode in (1, 2), p.stdout + p.stderr
    assert not list(results.glob("*.interrupted.*")), sorted(results.iterdir())
    first, session = header(results)
    assert first.startswith("heaplab: PARTIAL session "), first
    assert "1 of 7 collected tests ran (6 selected did not run" in first, first
    assert session["tests"] == {"collected": 7, "deselected": 0, "selected": 7, "ran": 1}
    assert not session["complete"] and not session["interrupted"], session
    assert session["failed_tests"] == ["exp/test_inner.py::test_fail"], session


def test_an_xdist_session_of_a_k_selection_is_partial(tmp_path):
    """-n 2 -k: the controller never saw the deselection (the workers
    deselect), so the tables of two tests of seven said 'complete session',
    '2 of 2 collected tests ran'."""
    pytest.importorskip("xdist", reason="tools/setup.sh installs pytest-xdist")
    p, results = run_session(tmp_path, STOPPING, "-n", "2", "-k", "10 or 20",
                             name="exp/test_inner.py", target="exp")
    assert p.returncode == 0, p.stdout + p.stderr
    first, session = header(results)
    assert first.startswith("heaplab: PARTIAL session "), first
    assert "2 of 7 collected tests ran (5 deselected)" in first, first
    assert session["tests"] == {"collected": 7, "deselected": 5, "selected": 2, "ran": 2}
    assert sorted(e["what"] for e in json.loads(
        (results / "effects.json").read_text())["effects"]) == ["size 10", "size 20"]


def test_an_interrupted_session_leaves_the_complete_tables(tmp_path):
    """An interrupted session (Ctrl-C, exit status 2) wrote its partial
    tables over the last complete ones without a word.  They now go to
    table.interrupted.txt, effects.interrupted.txt and .json, and a line says
    so."""
    source = """
        import os
        def test_a(lab):
            lab.record(fake("E", "a", 1))
            lab.effect("E", "a", "1", "1", arm="a", phase="fill", ok=True)
            if os.environ.get("INTERRUPT"):
                raise KeyboardInterrupt
        def test_b(lab):
            lab.record(fake("E", "b", 2))
            lab.effect("E", "b", "2", "2", arm="b", phase="fill", ok=True)
    """
    results, complete = complete_tables(tmp_path, source)
    p, results = run_session(tmp_path, source, env={"INTERRUPT": "1"})
    assert p.returncode == 2, p.stdout + p.stderr
    assert_kept(results, complete)
    partial = json.loads((results / "effects.interrupted.json").read_text())["effects"]
    assert [e["what"] for e in partial] == ["a"]
    assert [r[1] for r in table_of(results / "table.interrupted.txt")] == ["a"]
    assert "the session was interrupted" in p.stdout, p.stdout


def test_a_session_whose_output_is_closed_writes_its_part_and_says_so(tmp_path):
    """`pytest experiments | head`: the reader goes away, and pytest ends
    at its next write (BrokenPipeError: an internal error, exit status 1).
    The tables were written after pytest's own summary lines, so such a
    session wrote none, and said nothing.  They are written at the session's
    end now, before pytest writes, as an interrupted session's (beside the
    last complete ones), and stderr -- which still reaches the user -- says
    why the session stopped and where its part is.  The reader here closes
    its end while the first test runs (the test waits for it: a file the
    parent makes once the pipe is closed)."""
    import time
    source = """
        import os, time
        def test_a(lab):
            lab.record(fake("E", "a", 1))
            lab.effect("E", "a", "1", "1", arm="a", phase="fill", ok=True)
            if os.environ.get("CLOSED_FLAG"):
                open(os.environ["CLOSED_FLAG"] + ".running", "w").close()
                deadline = time.monotonic() + 60
                while not os.path.exists(os.environ["CLOSED_FLAG"]):
                    assert time.monotonic() < deadline, "the parent never closed the pipe"
                    time.sleep(0.01)
        def test_b(lab):
            lab.record(fake("E", "b", 2))
            lab.effect("E", "b", "2", "2", arm="b", phase="fill", ok=True)
    """
    results, complete = complete_tables(tmp_path, source)
    flag = tmp_path / "closed"
    e = session_env(results, {"CLOSED_FLAG": str(flag)})
    child = subprocess.Popen([*PYTEST, "-p", "no:cacheprovider",
                              "test_inner.py"], cwd=tmp_path, env=e, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "closed.running").exists():
            assert child.poll() is None, child.stderr.read()
            assert time.monotonic() < deadline, "test_a never started"
            time.sleep(0.01)
        child.stdout.close()                     # the reader goes away (`| head` exits)
        flag.touch()
        err = child.stderr.read()
        status = child.wait(timeout=60)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert status == 1, err
    assert "standard output was closed" in err and "after 1 of 2 tests" in err, err
    assert str(results / "table.interrupted.txt") in err, err
    assert "Traceback" not in err, err
    assert_kept(results, complete)                   # the last complete session's
    partial = json.loads((results / "effects.interrupted.json").read_text())
    assert [x["what"] for x in partial["effects"]] == ["a"]
    assert partial["session"]["interrupted"] is True
    assert partial["session"]["exit_status"] == 3
    assert [r[1] for r in table_of(results / "table.interrupted.txt")] == ["a"]
    first, _ = header(results, "table.interrupted.txt")
    assert first.startswith("heaplab: INTERRUPTED session"), first
