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
                      "phys_before": 8 * MiB, "phys_after": after_mib * MiB}]}
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
