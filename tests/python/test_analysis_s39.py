"""The analysis side under hostile and newcomer use (session 39's hunt):
`heaplab compare` and `heaplab report` given wrong input, interrupted or
short of disk.  The folders are written by hand: no arm runs here."""
import json
import os
import subprocess
import sys

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

