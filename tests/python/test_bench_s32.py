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
