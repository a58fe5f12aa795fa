"""Experiment.run's saved repeats (session 20's hunt): records.csv had N
rows per phase and no column telling the repeats apart, and a run left the
<arm>.r<k>.json (or <arm>.json) of an earlier run with another --repeat in
results/<experiment>/, so records.csv, load_arms and the reports mixed the
two runs as if they were repeats of one.  A tiny Python arm, three runs."""
import csv
import os

from heaplab.harness import load_arms

SOURCE = """
from heaplab.harness import Experiment
T = Experiment("TREP", "repeats on disk")

@T.arm("a")
@T.arm("b")
def arm(rec, **options):
    with rec.phase("fill"):
        x = bytearray(1 << 16)
"""


def _rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_records_csv_has_a_repeat_column_and_no_earlier_runs(experiment_source, tmp_path):
    mod = experiment_source("trep_exp", SOURCE)
    folder = tmp_path / "results" / "TREP"
    mod.T.run(repeat=3)
    rows = _rows(folder / "records.csv")
    assert list(rows[0])[:4] == ["experiment", "arm", "repeat", "phase"], list(rows[0])
    assert sorted((r["arm"], r["repeat"]) for r in rows) == \
        [(a, str(k)) for a in "ab" for k in range(3)], rows
    mod.T.run(repeat=2)
    # (.records.lock, .run.lock: the folder's locks, harness.records_lock)
    assert sorted(os.listdir(folder)) == [".records.lock", ".run.lock", "a.r0.json",
                                          "a.r1.json", "b.r0.json", "b.r1.json",
                                          "records.csv"], os.listdir(folder)
    assert sorted((r["arm"], r["repeat"]) for r in _rows(folder / "records.csv")) == \
        [(a, str(k)) for a in "ab" for k in range(2)]
    # one run after repeats, and only arm a: b's runs are not a's to remove
    mod.T.run(arms=["a"], repeat=1)
    assert sorted(os.listdir(folder)) == [".records.lock", ".run.lock", "a.json",
                                          "b.r0.json", "b.r1.json", "records.csv"], \
        os.listdir(folder)
    rows = _rows(folder / "records.csv")
    assert sorted((r["arm"], r["repeat"]) for r in rows) == \
        [("a", ""), ("b", "0"), ("b", "1")], rows
    assert len(load_arms(str(folder))) == 3
