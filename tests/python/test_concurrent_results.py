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
