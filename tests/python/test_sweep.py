"""Sweeps on Dask (issue 20): a real `dask scheduler` and two `dask worker`
processes on loopback, the `heaplab run` command line, run folders with
provenance, a worker killed mid-sweep, --resume, failures, Lua and command
arms, the same grid on the default local cluster, and `heaplab compare`.

Arms run at small sizes (HEAPLAB_E1_FILL_MIB=16, textures 8 MiB) so that the
32-task grid takes seconds."""
import glob
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from dask_cluster import Cluster
from procs import PYTEST, gone, wait_for_file

pytest.importorskip("distributed", reason="tools/setup.sh installs distributed")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SMALL = ["--env", "HEAPLAB_E1_FILL_MIB=16", "--env", "HEAPLAB_E1_TEXTURES_MIB=8"]
# three dimensions of two values: 8 cells (warm_pages 0,16,64 made 12: the
# 48 tasks ran twice, on the workers and on the local cluster, in make test's
# part that runs alone -- a third of that time for no other path)
GRID = ["--set", "warm_pages=0,64", "--set", "page_size=16k,64k",
        "--set", "release_per_sweep=64,1024",          # 8 cells
        "--arms", "off,on"]                            # (not E1's huge-page arm)
CELLS = 8
TASKS = CELLS * 2 * 2


def heaplab(*args, cwd=ROOT, timeout=600, env=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run([sys.executable, "-m", "heaplab", *args], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("dask"))
    yield c
    c.close()


def records(run):
    out = []
    for path in sorted(glob.glob(os.path.join(run, "*", "*", "*.r*.json"))):
        with open(path) as f:
            out.append((path, json.load(f)))
    return out


def run_folder(stdout):
    last = stdout.strip().splitlines()[-1]
    assert last.endswith(tuple("0123456789abcdef")), stdout
    return last.rsplit(": ", 1)[1]


# ---- the 32-task grid on the scheduler and two workers, one killed mid-sweep -----------------

@pytest.fixture(scope="module")
def tcp_run(cluster, tmp_path_factory):
    results = tmp_path_factory.mktemp("results")
    args = [sys.executable, "-m", "heaplab", "run", "e1", *GRID, "--repeat", "2", *SMALL,
            "--cluster", cluster.address, "--results", str(results), "--progress", "plain"]
    p = subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    # kill one worker halfway through the sweep (its running task moves to
    # the other; what is left runs on one worker: at 8 records of 32, 24
    # tasks ran one at a time, 2.5 s more of make test's part that runs alone)
    deadline = time.monotonic() + 300
    killed = None
    while p.poll() is None and time.monotonic() < deadline:
        found = glob.glob(str(results / "*" / "E1" / "*" / "*.json"))
        if len(found) >= TASKS // 2:
            killed = cluster.workers[0]
            killed.send_signal(signal.SIGKILL)
            killed.wait()
            break
        time.sleep(0.05)
    out, err = p.communicate(timeout=600)
    # a replacement, for the tests after this one
    cluster.workers.append(cluster.add_worker())
    cluster.wait_workers(2)
    return {"returncode": p.returncode, "stdout": out, "stderr": err, "killed": killed,
            "results": results}


def test_grid_on_dask_workers_every_record_once_with_provenance(tcp_run):
    assert tcp_run["killed"] is not None, "the sweep ended before a worker could be killed"
    assert tcp_run["returncode"] == 0, tcp_run["stdout"][-3000:] + tcp_run["stderr"][-3000:]
    run = run_folder(tcp_run["stdout"])
    assert f"{TASKS} ok, 0 failed" in tcp_run["stdout"]
    recs = records(run)
    keys = [d["sweep"]["key"] for _, d in recs]
    assert len(keys) == TASKS and len(set(keys)) == TASKS, "every task's record exactly once"
    cells = {(d["sweep"]["cell"], d["sweep"]["arm"], d["sweep"]["repeat"]) for _, d in recs}
    assert len(cells) == TASKS
    assert {d["sweep"]["status"] for _, d in recs} == {"ok"}
    # the sweep ran on both workers, and the killed one's share moved to the other
    workers = {d["sweep"]["worker"] for _, d in recs}
    assert len(workers) == 2, workers
    for _, d in recs:
        sw = d["sweep"]
        assert sw["env"]["HEAPLAB_WARM_PAGES"] == sw["values"]["warm_pages"]
        assert d["records"] and d["experiment"] == "E1"
        eff = {e["effect"]: e for e in d["effects_numeric"]}
        assert eff["returned_fraction"]["unit"] == "fraction"
        assert isinstance(eff["returned_fraction"]["value"], float)
    with open(os.path.join(run, "meta.json")) as f:
        meta = json.load(f)
    assert meta["grid"] == {"warm_pages": ["0", "64"], "page_size": ["16k", "64k"],
                            "release_per_sweep": ["64", "1024"]}
    assert meta["repeat"] == 2 and meta["arms"] == ["off", "on"] and meta["tasks"] == TASKS
    assert meta["command_line"][1:3] == ["run", "e1"] or "run" in meta["command_line"]
    assert meta["heaplab"] and meta["git"]["commit"]
    r = meta["runs"][0]
    assert r["one_arm_per_worker"] and len(r["workers_before"]) == 2
    for info in r["workers_before"].values():
        for k in ("uname", "kernel", "cpu_model", "cores", "memory_bytes", "thp",
                  "vm_max_map_count", "load_average", "python", "lua", "compiler"):
            assert info.get(k) not in (None, ""), k
    assert len(r["workers_after"]) == 1, "the killed worker is gone at the end"
    latest = os.path.join(os.path.dirname(run), "latest")
    assert os.path.realpath(latest) == os.path.realpath(run)


def test_resume_runs_nothing_when_complete(cluster, tcp_run):
    run = run_folder(tcp_run["stdout"])
    before = {p: os.stat(p).st_mtime_ns for p, _ in records(run)}
    p = heaplab("run", "--resume", run, "--cluster", cluster.address, "--progress", "plain")
    assert p.returncode == 0, p.stdout + p.stderr
    assert f"0 ok, 0 failed, {TASKS} already complete" in p.stdout, p.stdout
    after = {q: os.stat(q).st_mtime_ns for q, _ in records(run)}
    assert before == after, "no record was written again"
    with open(os.path.join(run, "meta.json")) as f:
        meta = json.load(f)
    assert [r["tasks_run"] for r in meta["runs"]] == [TASKS, 0]


def test_a_run_folder_in_use_is_refused(cluster, tcp_run):
    """Two --resume of one folder at once ran every missing task twice, and
    the last to write meta.json dropped the other's entry.  An invocation
    holds the folder (a lock file, flock): a second is refused, exit 2,
    before anything runs or is written."""
    from heaplab.sweep import _lock_run
    run = run_folder(tcp_run["stdout"])
    with open(os.path.join(run, "meta.json")) as f:
        meta_before = f.read()
    locks = []
    _lock_run(run, locks)              # as the run (or a resume) in progress holds it
    try:
        p = heaplab("run", "--resume", run, "--cluster", cluster.address, "--progress", "plain")
    finally:
        for fd in locks:
            os.close(fd)
    assert p.returncode == 2, p.stdout + p.stderr
    assert "another heaplab run is using this run folder" in p.stderr, p.stderr
    with open(os.path.join(run, "meta.json")) as f:
        assert f.read() == meta_before


def test_same_grid_on_the_local_cluster_compares_equal(tcp_run, tmp_path):
    p = heaplab("run", "e1", *GRID, "--repeat", "2", *SMALL, "--results", str(tmp_path),
                "--progress", "plain")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    local = run_folder(p.stdout)
    tcp = run_folder(tcp_run["stdout"])
    c = heaplab("compare", tcp, local, "--effect", "returned_fraction", "--json")
    assert c.returncode == 0, c.stderr
    rows = json.loads(c.stdout)
    assert len(rows) == CELLS * 2, "every cell x arm of the effect"
    bad = [r for r in rows if r["significant"]]
    assert not bad, f"significant differences between two runs of one grid: {bad}"
    text = heaplab("compare", tcp, local, "--effect", "returned_fraction")
    assert f"0 of {CELLS * 2} effect(s) differ significantly" in text.stdout, text.stdout
    assert max(len(x) for x in text.stdout.splitlines()[2:]) <= 120


def test_compare_reports_a_real_difference(cluster, tmp_path):
    """compare can say yes: MADV_FREE keeps released pages charged, so E1's
    on arm returns almost nothing of its footprint.  (The runs on the
    module's cluster: a local cluster started and stopped for each of the
    four took most of the time; the local cluster's own run is
    test_same_grid_on_the_local_cluster_compares_equal's.)"""
    runs = []
    for advice in ("dontneed", "free"):
        p = heaplab("run", "e1", "--arms", "on", "--set", f"release_advice={advice}",
                    "--repeat", "2", *SMALL, "--results", str(tmp_path / advice),
                    "--cluster", cluster.address, "--progress", "plain")
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        runs.append(run_folder(p.stdout))
    c = heaplab("compare", *runs, "--effect", "returned_fraction", "--json")
    # the cells differ in their option value: nothing in common
    assert c.returncode == 2 and "no effect in common" in c.stderr
    # same option values, different behaviour: the environment, not the grid
    runs = []
    for advice in ("dontneed", "free"):
        p = heaplab("run", "e1", "--arms", "on", "--repeat", "2", *SMALL,
                    "--env", f"HEAPLAB_RELEASE_ADVICE={advice}",
                    "--results", str(tmp_path / ("env-" + advice)), "--cluster",
                    cluster.address, "--progress", "plain")
        assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
        runs.append(run_folder(p.stdout))
    c = heaplab("compare", *runs, "--effect", "returned_fraction", "--json")
    rows = json.loads(c.stdout)
    assert len(rows) == 1 and rows[0]["significant"], rows
    # --tolerance nan (nothing significant) and -5 were taken without a word
    for bad, shown in (("nan", "nan"), ("-5", "-5.0"), ("inf", "inf")):
        c = heaplab("compare", *runs, "--tolerance", bad)
        assert c.returncode == 2 and f"--tolerance {shown}: expected" in c.stderr, \
            (bad, c.returncode, c.stdout[-1000:], c.stderr[-1000:])


# ---- failures, Lua arms, command arms ------------------------------------------------------

FAKE_ARM = """
import json, sys
arm = sys.argv[1]
if arm == "crash":
    sys.stderr.write("boom: the arm crashed\\n")
    sys.exit(3)
if arm == "hang":
    import time; time.sleep(60)
print(json.dumps({"experiment": "FAKE", "title": "fake", "arm": arm, "options": {}, "params": {},
                  "error": None, "records": [{"experiment": "FAKE", "arm": arm, "phase": "p",
                  "index": 0, "phys_before": 1, "phys_after": 2, "phys_peak": 3}],
                  "notes": {}, "series": []}))
"""


def test_failures_are_recorded_and_the_sweep_goes_on(cluster, tmp_path):
    # (--timeout 1: the hang arm's, run twice, is the test's time; the
    # good and crash arms -- python without heaplab -- end in a twentieth
    # of it)
    script = tmp_path / "fake_arm.py"
    script.write_text(FAKE_ARM)
    p = heaplab("run", "--command", f"{sys.executable} {script} {{arm}}",
                "--arms", "good,crash,hang", "--timeout", "1", "--cluster", cluster.address,
                "--results", str(tmp_path / "r"), "--progress", "plain")
    assert p.returncode == 1, p.stdout + p.stderr          # some task failed
    assert "1 ok, 2 failed" in p.stdout, p.stdout
    run = run_folder(p.stdout)
    by_arm = {d["sweep"]["arm"]: d["sweep"] for _, d in records(run)}
    assert by_arm["good"]["status"] == "ok"
    assert by_arm["crash"]["status"] == "failed" and by_arm["crash"]["returncode"] == 3
    assert "boom: the arm crashed" in by_arm["crash"]["stderr_tail"]
    assert "no arm JSON" in by_arm["crash"]["error"]
    assert by_arm["hang"]["status"] == "failed" and "within 1.0 s" in by_arm["hang"]["error"]
    # resume re-runs the failed tasks only
    p = heaplab("run", "--resume", run, "--cluster", cluster.address, "--timeout", "1",
                "--progress", "plain")
    assert "0 ok, 2 failed, 1 already complete" in p.stdout, p.stdout


def test_lua_experiment_and_launcher_command_arms(cluster, tmp_path):
    build = os.path.join(ROOT, os.environ.get("BUILD", "build"))
    if not os.path.exists(os.path.join(build, "bindings", "lua", "heaplab.so")):
        pytest.fail("the Lua module is not built: run make (ninja -C build) first")
    p = heaplab("run", "lua:e1_page_floor", "--set", "warm_pages=0,64", *SMALL,
                "--cluster", cluster.address, "--results", str(tmp_path / "lua"),
                "--progress", "plain")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    recs = [d for _, d in records(run_folder(p.stdout))]
    assert len(recs) == 6 and {d["arm"] for d in recs} == {"lua-on", "lua-off", "lua-huge"}
    on = [d for d in recs if d["arm"] == "lua-on"]
    frac = [e["value"] for d in on for e in d["effects_numeric"]
            if e["effect"] == "returned_fraction"]
    assert len(frac) == 2 and min(frac) > 0.9, frac     # E1's effect, read from Lua's records
    launcher = os.path.join(build, "clients", "heaplab-lua")
    program = os.path.join(ROOT, "tests", "clients", "programs", "page_floor.lua")
    p = heaplab("run", "--command", f"{launcher} {program} {{arm}} 16", "--arms",
                "lua/on,lua/off", "--arm-env", "lua/off:HEAPLAB_PAGE_RELEASE=false",
                "--cluster", cluster.address, "--results", str(tmp_path / "cmd"),
                "--progress", "plain")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    recs = {d["sweep"]["arm"]: d for _, d in records(run_folder(p.stdout))}
    drop = {a: next(r for r in d["records"] if r["phase"] == "drop") for a, d in recs.items()}
    ret = {a: (r["phys_before"] - r["phys_low_after_mark"]) for a, r in drop.items()}
    assert ret["lua/on"] > 4 * max(ret["lua/off"], 1 << 20), ret


def test_a_heaplab_name_no_part_of_heaplab_reads_is_refused_by_build_sweep():
    """The Python API's sweep, as the command line's: a typo in a HEAPLAB_
    name of the grid, --env or --arm-env ran every cell at the default."""
    from heaplab.sweep import SweepError, build_sweep
    for kwargs, said in [
            (dict(grid={"HEAPLAB_WARM_PAGE": ["0", "64"]}), "--set HEAPLAB_WARM_PAGE"),
            (dict(env={"HEAPLAB_WARM_PAGES": "64", "HEAPLAB_PAGE_SIZ": "16k"}),
             "--env HEAPLAB_PAGE_SIZ"),
            (dict(arm_env={"on": {"HEAPLAB_Warm_Pages": "1"}}), "--arm-env on: HEAPLAB_Warm_Pages")]:
        with pytest.raises(SweepError, match=f"^{said}: heaplab reads no such variable; did you "
                                             "mean HEAPLAB_"):
            build_sweep("e1", **kwargs)
    # what heaplab reads passes that check (the grid of an option's variable,
    # a protocol figure, a variable of the experiment's own)
    sweep = build_sweep("e1", arms=["on"], grid={"HEAPLAB_WARM_PAGES": ["0"]},
                        env={"HEAPLAB_E1_FILL_MIB": "16", "HEAPLAB_X_MINE": "1", "OTHER": "1"})
    assert len(sweep.tasks) == 1


@pytest.mark.shares_the_machine   # ~35 refused command lines: no time, no wait, no footprint
def test_bad_input_names_what_is_wrong(tmp_path):
    # a path that is not a Python module gave an AttributeError traceback, exit 1
    not_py = tmp_path / "notes.txt"
    not_py.write_text("root:x:0:0\n")
    # a file importing a module not installed (E6's pytest under heaplab[sweep]):
    # a ModuleNotFoundError traceback, exit 1
    needs = tmp_path / "needs.py"
    needs.write_text("import heaplab_no_such_module\n")
    # a meta.json without what --resume reads: a KeyError traceback
    no_exp = tmp_path / "no_exp"
    no_exp.mkdir()
    (no_exp / "meta.json").write_text(json.dumps({"run_id": "x", "kind": "python"}))
    not_obj = tmp_path / "not_obj"
    not_obj.mkdir()
    (not_obj / "meta.json").write_text("[]")
    # fields of the wrong type: TypeError / AttributeError tracebacks, or
    # every task failed (a grid of numbers), or 'ab' read as arms a and b
    typed = {}
    for key, bad in (("arms", None), ("arms", "ab"), ("repeat", "2"), ("runs", {}),
                     ("grid", {"X": [1]})):
        folder = tmp_path / f"typed_{key}_{type(bad).__name__}"
        folder.mkdir()
        m = {"run_id": "x", "kind": "python", "experiment": "e1", "arms": ["on"], "grid": {},
             "repeat": 1, key: bad}
        (folder / "meta.json").write_text(json.dumps(m))
        typed[folder] = key
    cases = [
        *[(["run", "--resume", str(f)], f"{f}/meta.json: ['{k}'] is not what heaplab run writes")
          for f, k in typed.items()],
        (["run", "--resume", str(no_exp)], f"{no_exp}/meta.json: no ['experiment']"),
        (["run", "--resume", str(not_obj)], f"{not_obj}/meta.json: not a run's meta.json"),
        (["run", str(not_py)], f"{not_py}: not a Python module"),
        (["run", str(needs)], "imports 'heaplab_no_such_module', which is not installed"),
        (["run", "e1", "--set", "no_such_option=1"], "not an option of heaplab"),
        # a value the library refuses: every task failed after the cluster
        # started (a run folder of failed records), where a name was refused
        (["run", "e1", "--set", "warm_pages=0,abc"],
         "--set warm_pages=abc: option warm_pages: 'abc' is not a whole number"),
        (["run", "e1", "--set", "HEAPLAB_WARM_PAGES=-1"],
         "--set HEAPLAB_WARM_PAGES=-1: option warm_pages: '-1' is out of range"),
        (["run", "e1", "--env", "HEAPLAB_WARM_PAGES=abc"],
         "--env HEAPLAB_WARM_PAGES=abc: option warm_pages: 'abc' is not a whole number"),
        (["run", "--command", "true {arm}", "--arms", "a", "--arm-env",
          "a:HEAPLAB_PAGE_SIZE=3000"], "--arm-env a: HEAPLAB_PAGE_SIZE=3000: option page_size"),
        # a HEAPLAB_ name heaplab reads no variable of: every arm ignored it
        # (a warning in each task's stderr) and every cell ran at the default
        (["run", "e1", "--set", "HEAPLAB_WARM_PAGE=0,64"],
         "--set HEAPLAB_WARM_PAGE: heaplab reads no such variable; did you mean "
         "HEAPLAB_WARM_PAGES?"),
        (["run", "e1", "--env", "HEAPLAB_Warm_Pages=64"],
         "--env HEAPLAB_Warm_Pages: heaplab reads no such variable; did you mean "
         "HEAPLAB_WARM_PAGES?"),
        (["run", "--command", "true {arm}", "--arms", "a", "--arm-env", "a:HEAPLAB_PAGESIZE=4k"],
         "--arm-env a: HEAPLAB_PAGESIZE: heaplab reads no such variable; did you mean "
         "HEAPLAB_PAGE_SIZE?"),
        # the same value twice, as the library reads it (two cells alike)
        (["run", "e1", "--set", "page_size=16k,16384"],
         "--set page_size: 16k and 16384 are the same value (16384)"),
        (["run", "e1", "--set", "page_release=true,false"], "the arms set that option"),
        (["run", "e1", "--arms", "middle"], "no arm(s) ['middle']"),
        (["run", "e99"], "e99"),
        (["run", "e1", "--set", "warm_pages"], "expected NAME=VALUE"),
        (["run", "e1", "--repeat", "0"], "--repeat 0"),
        (["run", "e1", "--cluster", "udp://x"], "expected local or tcp://"),
        (["run", "--resume", str(tmp_path)], "not a sweep run folder"),
        (["compare", str(tmp_path), str(tmp_path)], "not a sweep run folder"),
        # tasks of one key ran once and were counted twice ("2 ok", one record)
        (["run", "--command", "true {arm}", "--arms", "x,x"], "arm 'x' named twice"),
        (["run", "--command", "true {arm}", "--arms", "a/b,a_b"],
         "arm 'a_b' and arm 'a/b' would be saved to one file (a_b.json)"),
        # the experiment's name is a folder of the run: '../../x' wrote the
        # records outside it, 'foo/bar' where neither --resume nor report looked
        (["run", "../../escaped", "--command", "true {arm}", "--arms", "a"],
         "the experiment's name '../../escaped': expected a non-empty name without '/'"),
        # an option an arm sets, given as its variable, was a silent no-op
        (["run", "e1", "--arms", "off", "--set", "HEAPLAB_PAGE_RELEASE=false,true"],
         "--set HEAPLAB_PAGE_RELEASE: the arms set that option"),
        # --arm-env of no arm was refused for --command only
        (["run", "e1", "--arms", "on", "--arm-env", "onn:HEAPLAB_WARM_PAGES=64"],
         "--arm-env onn: not one of the arms ['on']"),
        # a variable without its value (HEAPLAB_WARM_PAGES as ''), a value
        # twice (two cells of one value: every task of it run twice)
        (["run", "e1", "--env", "HEAPLAB_WARM_PAGES"],
         "--env 'HEAPLAB_WARM_PAGES': expected NAME=VALUE"),
        (["run", "e1", "--set", "warm_pages=0,64,0"], "a value given twice"),
    ]
    for args, needle in cases:
        p = heaplab(*args, "--results", str(tmp_path)) if args[0] == "run" else heaplab(*args)
        assert p.returncode == 2 and needle in p.stderr, (args, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr, p.stderr


def test_a_lua_experiment_without_the_module_says_so(tmp_path):
    """The error kept the last 300 characters of lua5.4's message -- the list
    of files it tried -- and cut off "module 'heaplab' not found" (the
    installation hunt, session 26)."""
    p = subprocess.run([sys.executable, "-m", "heaplab", "run", "lua:e1_page_floor",
                        "--results", str(tmp_path)], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120,
                       env={**os.environ, "HEAPLAB_LUA_CPATH": str(tmp_path / "?.so")})
    assert p.returncode == 2 and "module 'heaplab' not found" in p.stderr and \
        "HEAPLAB_LUA_CPATH" in p.stderr, p.stdout + p.stderr
    assert "Traceback" not in p.stderr, p.stderr


def test_a_folder_that_does_not_exist_is_named_so(tmp_path):
    """`run --resume` and `compare` of a mistyped path said "not a sweep run
    folder (no meta.json)", as if the folder were there without its meta.json;
    so did `compare` of a file (`run --resume` said "not a folder")."""
    gone_dir = tmp_path / "no_such_run"
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for args in (["run", "--resume", str(gone_dir), "--results", str(tmp_path)],
                 ["compare", str(gone_dir), str(tmp_path)]):
        p = heaplab(*args)
        assert p.returncode == 2 and f"{gone_dir}: no such folder" in p.stderr, (args, p.stderr)
        assert "meta.json" not in p.stderr and "Traceback" not in p.stderr, p.stderr
    # a file: "not a folder" from both (compare said "no meta.json" of it)
    for args in (["run", "--resume", str(a_file), "--results", str(tmp_path)],
                 ["compare", str(a_file), str(tmp_path)]):
        p = heaplab(*args)
        assert p.returncode == 2 and f"{a_file}: not a folder" in p.stderr, (args, p.stderr)
        assert "meta.json" not in p.stderr and "Traceback" not in p.stderr, p.stderr


# ---- a task's processes ------------------------------------------------------------------------

LINGER_ARM = """
import json, os, subprocess, sys, time
h = subprocess.Popen(["sleep", "300"])       # left running; holds the task's stderr
with open(sys.argv[1], "w") as f:
    f.write(str(h.pid))
print(json.dumps({"experiment": "X", "title": "", "arm": "a", "options": {}, "params": {},
                  "records": [{"phase": "p", "status": "ok"}], "notes": {}, "series": []}),
      flush=True)
if len(sys.argv) > 2:
    time.sleep(300)
"""


def _task(argv):
    return {"kind": "argv", "argv": argv, "arm": "a", "experiment": "X", "key": "k",
            "cell": "c", "values": {}, "repeat": 0, "timeout": 8}


SHAPED_ARM = """
import json, sys
print("arm-stderr", file=sys.stderr)
doc = {"experiment": "X", "title": "", "arm": "a", "options": {}, "params": {}, "notes": {},
       "series": [], "error": None,
       "records": [{"phase": "p", "status": "ok", "phys_before": 1}]}
shape = sys.argv[1]
if shape == "records_not_phases":
    doc["records"] = [1, 2]
elif shape == "figure_a_string":
    doc["records"][0]["phys_before"] = "1"
elif shape == "blank_error":
    doc["error"] = "   "
elif shape == "no_records":
    doc["records"] = []
print(json.dumps(doc))
"""


@pytest.mark.parametrize("shape,needle", [
    ("records_not_phases", "the arm JSON on stdout cannot be read: record 0 is not a phase"),
    ("figure_a_string", "'phys_before' is '1', expected a number or null"),
    ("blank_error", "the arm raised: (an empty error)"),
    ("no_records", "the arm recorded no phase"),
])
def test_a_task_whose_arm_json_is_malformed_is_a_failed_record(tmp_path, shape, needle):
    """An arm document of the wrong shape made run_task raise (AttributeError,
    TypeError, IndexError): the task 'failed on every worker' and its record
    lost its exit status, stderr and argv.  One with no phase records was
    'ok', and every --resume ran it again.  Each is now a failed record
    saying why, with the rest of the task's figures; 'started' is the start
    time (it held the stderr's last line)."""
    from heaplab.sweep import run_task
    prog = tmp_path / "arm.py"
    prog.write_text(SHAPED_ARM)
    rec = run_task(_task([sys.executable, str(prog), shape]))
    sw = rec["sweep"]
    assert sw["status"] == "failed" and needle in sw["error"], sw["error"]
    assert sw["returncode"] == 0 and "arm-stderr" in sw["stderr_tail"] and sw["argv"], sw
    assert sw["started"].startswith("20") and "T" in sw["started"], sw["started"]
    good = run_task(_task([sys.executable, str(prog), "good"]))["sweep"]
    assert good["status"] == "ok" and good["error"] is None, good


def test_an_arm_that_exits_non_zero_after_its_json_is_a_failed_task(tmp_path):
    """An arm that printed a whole arm document, then exited 3 (a crash at
    its exit, a check after the phases), is a failed task -- not ok, not
    left out of --resume."""
    from heaplab.sweep import run_task
    prog = tmp_path / "arm.py"
    prog.write_text(SHAPED_ARM + "sys.exit(3)\n")
    sw = run_task(_task([sys.executable, str(prog), "good"]))["sweep"]
    assert (sw["status"], sw["returncode"], sw["error"]) == ("failed", 3, "exit 3"), sw


def test_peak_above_start_is_the_highest_peak_over_the_first_phases_start():
    """The generic effect peak_above_start: the highest phys_peak of the
    arm's phases above the first phase's phys_before (the lowest peak said
    10 MiB of an arm that reached 30 above its start)."""
    from heaplab.sweep import effects_of
    mib = 1 << 20
    effects = effects_of({"records": [
        {"phase": "a", "phys_before": 10 * mib, "phys_peak": 40 * mib},
        {"phase": "b", "phys_before": 30 * mib, "phys_peak": 20 * mib}]})
    assert effects == [{"effect": "peak_above_start", "value": 30.0, "unit": "MiB",
                        "threshold": None, "passed": None}], effects


def test_a_task_that_leaves_a_helper_running_is_recorded_and_the_helper_stopped(tmp_path):
    """run_task ran the arm with subprocess.run(capture_output, timeout): a
    helper the arm left running held its pipes, so the task waited for its
    whole timeout, was recorded failed ('no result within'), and the helper
    outlived the sweep (no process group of its own, none killed)."""
    from heaplab.sweep import run_task
    prog = tmp_path / "arm.py"
    prog.write_text(LINGER_ARM)
    pidfile = tmp_path / "helper"
    pid = None
    try:
        t0 = time.monotonic()
        rec = run_task(_task([sys.executable, str(prog), str(pidfile)]))
        took = time.monotonic() - t0
        pid = int(pidfile.read_text())
        assert rec["sweep"]["status"] == "ok", rec["sweep"]["error"]
        assert rec["records"] == [{"phase": "p", "status": "ok"}] and took < 8, took
        # (SIGKILLed: its pipes close before /proc shows it a zombie)
        deadline = time.monotonic() + 30
        while not gone(pid) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gone(pid), f"the arm's helper {pid} outlived its task"
    finally:
        if pid is not None and not gone(pid):
            os.kill(pid, signal.SIGKILL)


RUN_TASK_THEN_DIE = """
import sys
from heaplab.sweep import run_task
run_task({"kind": "argv", "argv": sys.argv[1:], "arm": "a", "experiment": "X", "key": "k",
          "cell": "c", "values": {}, "repeat": 0, "timeout": 600})
"""


def test_a_task_dies_with_its_worker(tmp_path):
    """A task's process is in a session of its own (out of reach of the
    terminal's Ctrl-C that stops a local cluster's workers): it must not
    outlive the worker running it, here killed with SIGKILL."""
    prog = tmp_path / "arm.py"
    prog.write_text(LINGER_ARM)
    pidfile = tmp_path / "helper"
    worker = subprocess.Popen([sys.executable, "-c", RUN_TASK_THEN_DIE, sys.executable,
                               str(prog), str(pidfile), "stay"], start_new_session=True)
    arm = None
    try:
        wait_for_file(pidfile, worker)
        arm = int(subprocess.run(["ps", "-o", "pid=", "--ppid", str(worker.pid)],
                                 capture_output=True, text=True).stdout.split()[0])
        worker.kill()
        worker.wait()
        deadline = time.monotonic() + 30
        while not gone(arm) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert gone(arm), f"the task's process {arm} outlived its worker"
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        for pid in (arm, int(pidfile.read_text()) if pidfile.exists() else None):
            if pid is not None and not gone(pid):
                os.kill(pid, signal.SIGKILL)


# ---- --repeat in the experiment suite ---------------------------------------------------------

def test_median_arm_takes_the_median_of_every_number():
    from heaplab.harness import median_arm
    runs = [{"experiment": "E", "arm": "a", "records": [
        {"phase": "p", "phys_before": v, "stats": {"cycles": v}, "notes": {"k": v, "s": "x"}}],
        "notes": {"warm_bytes": v, "rounds": [v]}} for v in (5, 1, 3)]
    m = median_arm(runs)
    r = m["records"][0]
    assert (r["phys_before"], r["stats"]["cycles"], r["notes"]["k"]) == (3, 3, 3)
    assert r["notes"]["s"] == "x" and m["notes"]["warm_bytes"] == 3
    assert m["notes"]["rounds"] == [5] and m["repeats"] == 3


def test_experiment_suite_repeat_judges_on_the_median(tmp_path):
    env = dict(os.environ, HEAPLAB_RESULTS=str(tmp_path), HEAPLAB_E1_FILL_MIB="16",
               HEAPLAB_E1_TEXTURES_MIB="16")
    p = subprocess.run([*PYTEST, "-q", "experiments", "-k",
                        "test_e1_page_floor", "--repeat", "3", "-p", "no:cacheprovider"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-2000:]
    assert "E1/off (repeat 3/3)" in p.stdout and "E1/on (repeat 1/3)" in p.stdout, p.stdout
    saved = sorted(os.path.basename(x) for x in glob.glob(str(tmp_path / "E1" / "*.json")))
    assert saved == [f"{a}.r{k}.json" for a in ("huge", "off", "on") for k in range(3)], saved
    p = subprocess.run([*PYTEST, "-q", "experiments", "-k",
                        "test_e1_page_floor", "--repeat", "0", "-p", "no:cacheprovider"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode != 0 and "--repeat 0" in p.stderr + p.stdout


def test_resume_without_a_folder_takes_latest(cluster, tmp_path):
    p = heaplab("run", "e1", "--arms", "on", *SMALL, "--cluster", cluster.address,
                "--results", str(tmp_path), "--progress", "plain")
    assert p.returncode == 0, p.stdout + p.stderr
    p = heaplab("run", "--resume", "--results", str(tmp_path), "--cluster", cluster.address,
                "--progress", "plain")
    assert p.returncode == 0 and "0 ok, 0 failed, 1 already complete" in p.stdout, p.stdout
    # RESULTS/latest given as the folder: the run made `latest` a link to
    # itself and failed (ELOOP) writing meta.json's last update
    run_id = os.readlink(tmp_path / "latest")
    p = heaplab("run", "--resume", str(tmp_path / "latest"), "--cluster", cluster.address,
                "--progress", "plain")
    assert p.returncode == 0 and "0 ok, 0 failed, 1 already complete" in p.stdout, \
        p.stdout + p.stderr[-2000:]
    assert os.readlink(tmp_path / "latest") == run_id
    with open(tmp_path / run_id / "meta.json") as f:
        runs = json.load(f)["runs"]
    assert len(runs) == 3 and "finished" in runs[-1], runs


def test_resume_names_a_damaged_record_and_runs_its_task_again(cluster, tmp_path):
    """complete_records passed over a record that was not JSON without a
    word; --resume now names it in a warning, counts its task as missing
    and runs it again, replacing the file."""
    p = heaplab("run", "e1", "--arms", "on", *SMALL, "--cluster", cluster.address,
                "--results", str(tmp_path), "--progress", "plain")
    assert p.returncode == 0, p.stdout + p.stderr
    run = run_folder(p.stdout)
    (path, data), = records(run)
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text[:100])
    p = heaplab("run", "--resume", run, "--cluster", cluster.address, "--progress", "plain")
    assert p.returncode == 0 and "1 ok, 0 failed, 0 already complete" in p.stdout, p.stdout
    assert f"{path} is not valid JSON" in p.stderr, p.stderr[-2000:]
    with open(path) as f:
        assert json.load(f)["sweep"]["status"] == "ok"
