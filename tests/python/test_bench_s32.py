"""bench.py, session 32's hunt: --results of the experiments' folder, a
HEAPLAB_* option that makes a workload do nothing, pair/compare on a time
of 0 and the load average, the --exe error.  bench.py is run as users run
it (a child process); the workloads that run are the small ones."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "experiments", "bench", "bench.py")
BUILD = os.environ.get("HEAPLAB_BUILD") or os.path.join(ROOT, "build")

pytestmark = pytest.mark.shares_the_machine


def bench(*args, env=None, timeout=300):
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True,
                          timeout=timeout, env=None if env is None else dict(os.environ, **env))


def fake(tmp_path, name, time_ns):
    """A benchmark command printing a record of time_ns."""
    script = tmp_path / f"{name}.sh"
    script.write_text('#!/bin/sh\necho \'{"workload": "fill", "params": {"bytes": 1}, '
                      f'"time_ns": {time_ns}, "checksum": "0x1", "vmhwm_bytes": 1, '
                      '"phases": [{"phase": "p", "ns": 1}], "error": null}\'\n')
    script.chmod(0o755)
    return str(script)


# ---- 2: --results of the experiment suite's folder ----------------------------------------

def test_results_holding_the_experiments_output_is_refused(tmp_path):
    """`bench.py run --results results` overwrote the pytest session's
    results/table.txt and wrote a records.csv of every experiment's arms
    (bench saves the table and CSV of every arm JSON under the folder).  A
    folder holding the suite's output is refused before anything runs,
    naming DIR/bench."""
    res = tmp_path / "results"
    (res / "E1").mkdir(parents=True)
    (res / "E1" / "on.json").write_text("{}")
    (res / "table.txt").write_text("the effects table\n")
    for signs in (("E1",), ("effects.json",), ("table.txt",)):
        sub = tmp_path / "-".join(signs)
        sub.mkdir()
        for s in signs:
            src = res / s
            if src.is_dir():
                (sub / s).mkdir()
            else:
                (sub / s).write_text(src.read_text() if src.exists() else "{}")
        p = bench("run", "--workload", "release", "--results", str(sub),
                  "--build", str(tmp_path / "nobuild"))
        assert p.returncode == 2 and f"--results {sub}: it holds" in p.stderr and \
            os.path.join(str(sub), "bench") in p.stderr, (signs, p.returncode, p.stderr)
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
        assert sorted(os.listdir(sub)) == sorted(signs), os.listdir(sub)
    # a folder of bench records (its table.txt bench's own): taken
    own = tmp_path / "own"
    own.mkdir()
    (own / "table.txt").write_text("x\n\nthe records in this folder (/x) come from:\n")
    p = bench("run", "--workload", "release", "--results", str(own),
              "--build", str(tmp_path / "nobuild"))
    assert p.returncode == 1 and "is not there" in p.stderr, p.stderr


# ---- 3: a HEAPLAB_* option that makes a workload do nothing --------------------------------

@pytest.mark.parametrize("workload, env, line", [
    ("release", {"HEAPLAB_PAGE_RELEASE": "0"}, "release/contiguous: nothing was released"),
    ("compact", {"HEAPLAB_COMPACT_LIVE_PCT": "1"}, "compact/compact=sparse: 0 bytes evacuated"),
])
def test_a_workload_that_did_nothing_is_a_table_and_a_problem_not_a_traceback(
        tmp_path, workload, env, line):
    """HEAPLAB_PAGE_RELEASE=0 (no page released) and HEAPLAB_COMPACT_LIVE_PCT=1
    (nothing evacuated) made the table a ZeroDivisionError traceback (per MiB
    released / evacuated), and the records, saved after the table, were lost.
    Now: the table with those cells empty, the records saved, the problem's
    line, exit 1."""
    if not os.access(os.path.join(BUILD, "experiments", "bench", "bench-heaplab"), os.X_OK):
        pytest.skip("no bench-heaplab in the build")
    out = tmp_path / "r"
    p = bench("run", "--workload", workload, "--results", str(out), "--build", BUILD,
              env=dict(env, HEAPLAB_BENCH_RUNS="1"))
    assert "Traceback" not in p.stderr and p.returncode == 1, (p.returncode, p.stderr[-2000:])
    assert line in p.stderr, p.stderr[-2000:]
    assert any(n.startswith(workload + "_") for n in os.listdir(out)), os.listdir(out)
    assert (out / "table.txt").exists()
    if workload == "release":
        # nothing released: no verdict on calls per run (it said ok)
        row = [ln for ln in p.stdout.splitlines() if ln.startswith("release: contiguous, calls")]
        assert row and "nothing released" in row[0] and not row[0].rstrip().endswith("ok"), row
    else:
        assert "nothing evacuated" in p.stdout, p.stdout


# ---- 13: pair / compare on a time of 0; pair's median and load; the load warning -----------

def _bench_module():
    import importlib.util
    spec = importlib.util.spec_from_file_location("heaplab_bench_s32", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_pair_and_compare_refuse_a_time_of_zero_and_pair_says_median_and_load(
        tmp_path, monkeypatch, capsys):
    """pair and compare on a record of time_ns 0: a ZeroDivisionError
    traceback.  pair printed no median B/A and no load average, though
    docs/performance.md quotes pairs by them; run, compare and pair said
    nothing at load >= 1 (the project's speed claims need load < 1)."""
    zero, three, five = fake(tmp_path, "zero", 0), fake(tmp_path, "three", 3), \
        fake(tmp_path, "five", 5)
    for mode, cmds in (("pair", (zero, five)), ("compare", (three, zero))):
        p = bench(mode, *cmds, "--rounds", "1")
        assert p.returncode == 1 and "Traceback" not in p.stderr, (mode, p.stderr)
        assert "printed a record with time_ns 0: a timed part takes more than 0 ns" \
            in p.stderr, (mode, p.stderr)
    b = _bench_module()
    for load, warned in ((2.5, True), (0.4, False)):
        monkeypatch.setattr(b.os, "getloadavg", lambda load=load: (load, load, load))
        assert b.main(["pair", three, five, "--rounds", "3"]) == 0
        out, err = capsys.readouterr()
        assert "median B/A 1.667 over 3 rounds" in out, out
        assert f"load average before / after: {load:.2f} / {load:.2f}" in out, out
        assert ("load average 2.50 >= 1" in err) == warned, err
        assert b.main(["compare", three, five, "--rounds", "1"]) == 0
        out, err = capsys.readouterr()
        assert ("bench: warning (before): load average 2.50 >= 1" in err) == warned, err
        assert b.main(["run", "--workload", "release", "--build", str(tmp_path / "nob")]) == 1
        out, err = capsys.readouterr()
        assert ("bench: warning (before): load average 2.50 >= 1" in err) == warned, err


# ---- 14: --exe naming some of the executables ---------------------------------------------

def test_exe_naming_some_allocators_says_which_are_not_given(tmp_path):
    """`run --exe heaplab=PATH` of a workload needing the peers blamed their
    packages (libgc-dev ...) and ninja -- with --exe no build folder is
    searched: the others were just not given."""
    exe = tmp_path / "bench-heaplab"
    exe.write_text("#!/bin/sh\nexit 1\n")
    exe.chmod(0o755)
    p = bench("run", "--workload", "fill", "--exe", f"heaplab={exe}")
    assert p.returncode == 1 and "--exe gave heaplab only; this run needs boehm, glibc, " \
        "jemalloc, mimalloc too" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) <= 2, p.stderr
