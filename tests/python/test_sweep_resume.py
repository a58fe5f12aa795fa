"""heaplab run --resume runs the run's own sweep: the one its meta.json
defines (session 20's hunt: a resume forgot --env, --arm-env and --timeout,
took a --set grid, an experiment, --arms or --repeat given beside it, and
counted a record of another grid "already complete").

The arms are a small Python script run as a --command (it echoes the
environment it got), on the module's dask scheduler and worker (on_cluster):
seconds each.  The tests of a stop run on a local cluster of their own."""
import glob
import json
import os
import subprocess
import sys
import time

import pytest

pytest.importorskip("distributed", reason="tools/setup.sh installs distributed")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

ECHO_ARM = """
import json, os, sys
arm = sys.argv[1]
env = {k: v for k, v in os.environ.items() if k.startswith("T_")}
print(json.dumps({"experiment": "ECHO", "title": "echo", "arm": arm, "options": {},
                  "params": {}, "error": None, "notes": {"env": env}, "series": [],
                  "records": [{"experiment": "ECHO", "arm": arm, "phase": "p", "index": 0,
                               "phys_before": 1, "phys_after": 2, "phys_peak": 3}]}))
"""


def heaplab(*args):
    return subprocess.run([sys.executable, "-m", "heaplab", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def run_folder(stdout):
    return stdout.strip().splitlines()[-1].rsplit(": ", 1)[1]


def records(run):
    out = {}
    for path in sorted(glob.glob(os.path.join(run, "*", "*", "*.r*.json"))):
        with open(path) as f:
            out[os.path.relpath(path, run)] = json.load(f)
    return out


@pytest.fixture
def arm(tmp_path):
    script = tmp_path / "echo_arm.py"
    script.write_text(ECHO_ARM)
    return f"{sys.executable} {script} {{arm}}"


@pytest.fixture(scope="module")
def on_cluster(tmp_path_factory):
    """`heaplab run`'s arguments to run on this module's dask scheduler and
    worker (one worker, one arm at a time: as --workers 1 did), shared by
    the tests of what a resume runs.  Each of them started a local cluster
    for every run and resume -- about 0.7 s more each, 17 in all; what they
    check is the run's and the resume's, not the cluster's.  The tests of
    a stop start a local cluster each: they stop, kill or SIGSTOP its
    workers and read its nannies."""
    from dask_cluster import Cluster
    c = Cluster(tmp_path_factory.mktemp("dask"), workers=1)
    yield ("--cluster", c.address, "--progress", "plain")
    c.close()


def test_resume_keeps_env_arm_env_and_timeout(arm, tmp_path, on_cluster):
    p = heaplab("run", "--command", arm, "--arms", "a,b", "--env", "T_SIZE=16",
                "--arm-env", "b:T_ONLY_B=yes", "--timeout", "30",
                "--results", str(tmp_path / "r"), *on_cluster)
    assert p.returncode == 0, p.stdout + p.stderr
    run = run_folder(p.stdout)
    with open(os.path.join(run, "meta.json")) as f:
        meta = json.load(f)
    assert meta["env"] == {"T_SIZE": "16"} and meta["arm_env"] == {"b": {"T_ONLY_B": "yes"}}
    assert meta["timeout"] == 30
    first = records(run)
    for rel in list(first):
        os.remove(os.path.join(run, rel))             # as if Ctrl-C came before them
    p = heaplab("run", "--resume", run, *on_cluster)
    assert p.returncode == 0 and "2 ok, 0 failed, 0 already complete" in p.stdout, \
        p.stdout + p.stderr
    again = records(run)
    env = {d["arm"]: d["notes"]["env"] for d in again.values()}
    # the resumed tasks ran with the run's --env and --arm-env (they got none before)
    assert env == {"a": {"T_SIZE": "16"}, "b": {"T_SIZE": "16", "T_ONLY_B": "yes"}}, env
    # a value that differs from the run's is refused, naming both
    for extra, needle in ((["--env", "T_SIZE=64"], "--env {'T_SIZE': '64'}"),
                          (["--arm-env", "a:T_X=1"], "--arm-env"),
                          (["--timeout", "600"], "--timeout 600 (the run's: 30)")):
        p = heaplab("run", "--resume", run, *extra, *on_cluster)
        assert p.returncode == 2 and needle in p.stderr and "meta.json" in p.stderr, \
            (extra, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr
    # the run's own values are no conflict
    p = heaplab("run", "--resume", run, "--timeout", "30", "--env", "T_SIZE=16", *on_cluster)
    assert p.returncode == 0 and "0 ok, 0 failed, 2 already complete" in p.stdout, \
        p.stdout + p.stderr


def test_resume_refuses_another_grid_experiment_arms_or_repeat(arm, tmp_path, on_cluster):
    p = heaplab("run", "--command", arm, "--arms", "a", "--set", "T_X=1,2",
                "--results", str(tmp_path / "r"), *on_cluster)
    assert p.returncode == 0, p.stdout + p.stderr
    run = run_folder(p.stdout)
    (c001,) = [rel for rel in records(run) if "/c001/" in rel]
    os.remove(os.path.join(run, c001))
    for extra, needle in ((["--set", "T_X=1,3"], "the run's grid: {'T_X': ['1', '2']}"),
                          (["e1"], "the experiment 'e1'"),
                          (["--arms", "a,b"], "--arms a,b (the run's: a)"),
                          (["--repeat", "2"], "--repeat 2 (the run's: 1)")):
        p = heaplab("run", *extra, "--resume", run, *on_cluster)
        assert p.returncode == 2 and needle in p.stderr, (extra, p.stdout, p.stderr)
        assert "Traceback" not in p.stderr
    assert not os.path.exists(os.path.join(run, c001)), "a refused resume ran nothing"
    p = heaplab("run", "--resume", run, *on_cluster)
    assert p.returncode == 0 and "1 ok, 0 failed, 1 already complete" in p.stdout, \
        p.stdout + p.stderr
    recs = records(run)
    assert {rel.split("/")[1]: d["notes"]["env"] for rel, d in recs.items()} == \
        {"c000": {"T_X": "1"}, "c001": {"T_X": "2"}}


def test_complete_records_checks_a_records_cell_values_and_env(tmp_path):
    """A record filed under a task's key but run with other cell values (or
    without the task's environment) is not that task's: complete_records
    counted it complete, and --resume never ran the task."""
    from heaplab.sweep import complete_records

    def write(cell, values, env):
        d = tmp_path / "X" / cell
        d.mkdir(parents=True, exist_ok=True)
        (d / "a.r0.json").write_text(json.dumps({
            "arm": "a", "records": [{"phase": "p"}],
            "sweep": {"key": f"X-{cell}-a-r0", "status": "ok", "values": values, "env": env}}))
    write("c000", {"T_X": "1"}, {"T_X": "1", "T_SIZE": "16"})
    write("c001", {"T_X": "3"}, {"T_X": "3", "T_SIZE": "16"})     # another grid's value
    write("c002", {"T_X": "4"}, {"T_X": "4"})                      # without the run's --env
    tasks = [{"key": f"X-c00{i}-a-r0", "cell": f"c00{i}", "values": {"T_X": v},
              "env": {"T_X": v, "T_SIZE": "16"}} for i, v in enumerate(("1", "2", "4"))]
    assert set(complete_records(str(tmp_path))) == {"X-c000-a-r0", "X-c001-a-r0", "X-c002-a-r0"}
    with pytest.warns(UserWarning) as w:
        done = complete_records(str(tmp_path), tasks=tasks)
    assert set(done) == {"X-c000-a-r0"}, set(done)
    text = " ".join(str(x.message) for x in w)
    assert "cell values {'T_X': '3'}" in text and "T_SIZE" in text, text


def test_a_failed_record_is_not_complete_even_with_its_phases(tmp_path):
    """A task that failed after recording its phases (the arm raised later,
    exited non-zero after printing its JSON, ran past its timeout) is run
    again by --resume: only status ok with a phase record is complete."""
    from heaplab.sweep import complete_records
    for arm, status, recs in (("ok", "ok", [{"phase": "p"}]),
                              ("late", "failed", [{"phase": "p"}]),
                              ("none", "ok", [])):
        d = tmp_path / "X" / "c000"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{arm}.r0.json").write_text(json.dumps({
            "arm": arm, "records": recs, "error": None if status == "ok" else "RuntimeError",
            "sweep": {"key": f"X-c000-{arm}-r0", "status": status, "values": {}, "env": {}}}))
    assert set(complete_records(str(tmp_path))) == {"X-c000-ok-r0"}


HANG_ARM = """
import time
time.sleep(30)           # (killed at the task's timeout)
"""


def test_a_resumed_task_gets_the_runs_timeout(tmp_path, on_cluster):
    """--resume without --timeout runs the tasks with the run's (meta.json's),
    not the default 600 s (a run made with --timeout 1.5 would wait 600 s
    for a hanging arm once resumed).  A real run and resume on the module's
    cluster: the hanging arm is killed after 0.5 s both times (before, the
    resume waited 600 s: the child's 20 s bound here).  (0.5 s, not 1.5:
    the arm only hangs, nothing it does must end within its timeout, and
    0.5 against 600 is the same proof -- 2 s less of make test.)"""
    script = tmp_path / "hang_arm.py"
    script.write_text(HANG_ARM)
    p = heaplab("run", "--command", f"{sys.executable} {script} {{arm}}", "--arms", "hang",
                "--timeout", "0.5", "--results", str(tmp_path / "r"), *on_cluster)
    assert p.returncode == 1 and "0 ok, 1 failed" in p.stdout, p.stdout + p.stderr
    run = run_folder(p.stdout)
    p = subprocess.run([sys.executable, "-m", "heaplab", "run", "--resume", run, *on_cluster],
                       cwd=ROOT, capture_output=True, text=True, timeout=20)
    assert p.returncode == 1 and "0 ok, 1 failed" in p.stdout, p.stdout + p.stderr
    (rec,) = records(run).values()
    assert "no result within 0.5 s" in rec["sweep"]["error"], rec["sweep"]


SLOW_ARM = """
import os, sys, time
open(os.path.join(sys.argv[2], sys.argv[1] + ".pid"), "w").write(str(os.getpid()))
time.sleep(120)
"""


@pytest.mark.parametrize("signame,status,word", [("SIGINT", 130, "interrupted"),
                                                  ("SIGTERM", 143, "terminated"),
                                                  ("SIGHUP", 129, "hung up")])
def test_ctrl_c_says_how_to_resume_and_meta_json_counts_what_ran(signame, status, word, tmp_path):
    """Ctrl-C; and SIGTERM (kill, a batch system's stop) and SIGHUP (the
    terminal closed) the same way -- they killed the run at once: exit
    -15, the invocation's meta.json entry with the whole plan as tasks_run
    and no counts (the sweeps hunt, session 24).  And the local cluster's
    close waited 4 s for the worker's thread running the task (dask's
    grace, 0.8 of 5 s) before it killed the worker, the task with it: the
    running tasks' groups are killed first."""
    import signal
    from procs import reap, wait_for_file
    p = _run_of(tmp_path)
    pid = None
    try:
        pid = int(wait_for_file(str(tmp_path / "a.pid"), p, seconds=120))
        t0 = time.monotonic()
        p.send_signal(getattr(signal, signame))
        out, err = p.communicate(timeout=120)
        took = time.monotonic() - t0
        run = os.path.realpath(tmp_path / "r" / "latest")
        assert p.returncode == status, (p.returncode, out, err[-3000:])
        assert f"{word}: heaplab run --resume {run}" in err, err[-3000:]
        with open(os.path.join(run, "meta.json")) as f:
            last = json.load(f)["runs"][-1]
        assert last.get("interrupted") and last["tasks_run"] == 0, last
        assert last["signal"] == signame and last["counts"]["ok"] == 0, last
        # (~0.3 s; dask's grace for the task's thread: 4 s at least)
        assert took < 3.5, f"{took:.1f} s from the {signame} to the exit"
    finally:
        reap(p, pid)


@pytest.mark.parametrize("signame,status,word", [("SIGINT", 130, "interrupted"),
                                                  ("SIGTERM", 143, "terminated")])
def test_a_stop_with_a_worker_that_cannot_answer_is_bounded(signame, status, word, tmp_path):
    """A stop's clean-up asked every local worker to kill its running
    tasks' groups (client.run) and waited with no bound: a worker that
    cannot answer -- SIGSTOPped here, or stuck in a call that holds its
    interpreter -- held the stop until the scheduler dropped the worker
    (worker-ttl: 5 minutes), and nothing said why (session 38).  Each
    worker gets 2 s (sweep.STOP_WAIT_S); one that does not answer is
    killed with its tasks' process groups, and stderr says so."""
    import signal
    from procs import gone, parent_of, reap, wait_for_file
    p = _run_of(tmp_path, workers=2)
    arms, worker = [], None
    try:
        arms = [int(wait_for_file(str(tmp_path / f"{a}.pid"), p, seconds=120)) for a in "ab"]
        worker = parent_of(arms[0])        # (the task's process: the worker's child)
        os.kill(worker, signal.SIGSTOP)
        t0 = time.monotonic()
        p.send_signal(getattr(signal, signame))
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail(f"no exit 30 s after the {signame} (a worker stopped)")
        took = time.monotonic() - t0
        run = os.path.realpath(tmp_path / "r" / "latest")
        assert p.returncode == status, (p.returncode, out, err[-3000:])
        assert err.endswith(f"{word}: heaplab run --resume {run}\n"), err[-3000:]
        assert (f"(pid {worker}) did not answer within 2 s (stopped, or stuck in a call?): "
                f"killed (SIGKILL) with its tasks' process groups {arms[0]}") in err, err[-3000:]
        assert "Traceback" not in err and "ERROR" not in err, err[-3000:]
        for pid in [worker, *arms]:
            assert gone(pid), f"{pid} outlived the run"
        with open(os.path.join(run, "meta.json")) as f:
            last = json.load(f)["runs"][-1]
        assert last["signal"] == signame and last["tasks_run"] == 0, last
        assert took < 8, f"{took:.1f} s from the {signame} to the exit"
    finally:
        if worker is not None and not gone(worker):
            os.kill(worker, signal.SIGKILL)
        reap(p, *arms)


def _as_in_a_terminal():
    """(preexec_fn) SIGINT's and SIGHUP's default actions, as in a job of a
    terminal -- whatever this pytest was started with: under `nohup` (a CI
    started so) SIGHUP is ignored, every child inherits that, and a run
    leaves an ignored signal ignored (the arm's SigIgn had SIGHUP: the
    fresh-clone .ci/run of d7fa846 failed on it)."""
    import signal
    for signum in (signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def _run_of(tmp_path, arm_text=None, arms="a,b", workers=1, **popen):
    """heaplab run of an arm script (arm_text; SLOW_ARM by default) with
    arms `arms` on `workers` local workers, its records under tmp_path/r,
    SIGINT's and SIGHUP's default actions in it (as in a terminal)."""
    script = tmp_path / "arm.py"
    script.write_text(SLOW_ARM if arm_text is None else arm_text)
    return subprocess.Popen([sys.executable, "-m", "heaplab", "run", "--command",
                             f"{sys.executable} {script} {{arm}} {tmp_path}", "--arms", arms,
                             "--results", str(tmp_path / "r"), "--workers", str(workers),
                             "--progress", "plain"], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_as_in_a_terminal, **popen)


@pytest.mark.parametrize("signame,status,word", [("SIGINT", 130, "interrupted"),
                                                  ("SIGTERM", 143, "terminated"),
                                                  ("SIGHUP", 129, "hung up")])
def test_a_terminals_ctrl_c_is_the_runs_alone(signame, status, word, tmp_path):
    """A terminal's Ctrl-C goes to its whole foreground process group: the
    local cluster's workers too (the tests above signal the run alone).
    Each worker's loop raised KeyboardInterrupt and closed -- a traceback
    on stderr (one run in two), the run's clean-up then waited 4 s for the
    closing worker, or 30 s for one that was gone (distributed's connect
    timeout, an ERROR line) (session 38).  The workers ignore it now; the
    run stops them.  SIGTERM to the group (a batch system's stop, `kill --
    -PGID`) killed the workers: each was started again, waited for 2 s
    and killed, a line each saying it had not answered.  SIGHUP to it (the
    terminal closed) killed multiprocessing's resource tracker: a warning
    and a KeyError traceback for each of its semaphores."""
    import signal
    from procs import gone, reap, wait_for_file
    p = _run_of(tmp_path, start_new_session=True)     # (its own group, as a terminal job)
    pid = None
    try:
        pid = int(wait_for_file(str(tmp_path / "a.pid"), p, seconds=120))
        # the task's process gets SIGINT and SIGHUP as the worker got them
        # (their default actions), neither ignored nor blocked
        with open(f"/proc/{pid}/status") as f:
            sigs = dict(line.split(":", 1) for line in f.read().splitlines())
        assert int(sigs["SigIgn"], 16) & 3 == 0 and int(sigs["SigBlk"], 16) & 3 == 0, sigs
        t0 = time.monotonic()
        os.killpg(p.pid, getattr(signal, signame))
        out, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
        run = os.path.realpath(tmp_path / "r" / "latest")
        assert p.returncode == status, (p.returncode, out, err[-3000:])
        assert err == f"{word}: heaplab run --resume {run}\n", err[-3000:]
        assert gone(pid)
        # (~0.3-0.8 s; a Ctrl-C 4.2 s before, in each of three runs)
        assert took < 3.5, f"{took:.1f} s from the {signame} to the exit"
    finally:
        reap(p, pid)


def test_a_terminals_ctrl_c_while_the_workers_start_is_one_line(tmp_path):
    """A terminal's Ctrl-C while a local worker started (importing
    distributed) killed the worker: "Nanny failed to start", two
    tracebacks and exit 1 (session 38).  The workers start with SIGINT
    blocked until they ignore it; the run stops as at any other time."""
    import signal
    from procs import reap
    p = _run_of(tmp_path, start_new_session=True)
    try:
        end = time.monotonic() + 60
        while not _children(p.pid, b"spawn_main"):
            assert p.poll() is None and time.monotonic() < end, p.communicate()
            time.sleep(0.005)
        os.killpg(p.pid, signal.SIGINT)       # (a worker just spawned: in its imports)
        out, err = p.communicate(timeout=60)
        assert p.returncode == 130, (p.returncode, out, err[-3000:])
        if os.path.exists(tmp_path / "r" / "latest"):
            run = os.path.realpath(tmp_path / "r" / "latest")
            assert err == f"interrupted: heaplab run --resume {run}\n", err[-3000:]
        else:
            assert err == "interrupted\n", err[-3000:]
    finally:
        reap(p, group=True)


def _children(pid, naming):
    """The children of pid whose command line holds `naming` (bytes)."""
    from procs import parent_of
    out = []
    for d in os.listdir("/proc"):
        try:
            if not d.isdigit() or parent_of(d) != pid:
                continue
            with open(f"/proc/{d}/cmdline", "rb") as f:
                if naming in f.read():
                    out.append(int(d))
        except (OSError, ValueError):
            pass
    return out


def _stopped_in_time(tmp_path, p, pid, t0):
    """The run p, Ctrl-C'd at t0 (time.monotonic), ended by it within 3.5 s:
    exit 130, how to resume its run folder on stderr's last line, no
    traceback and no close waited out, its task's process (pid) gone."""
    from procs import gone
    out, err = p.communicate(timeout=60)
    took = time.monotonic() - t0
    run = os.path.realpath(tmp_path / "r" / "latest")
    assert p.returncode == 130, (p.returncode, out, err[-3000:])
    assert err.endswith(f"interrupted: heaplab run --resume {run}\n"), err[-3000:]
    assert "Traceback" not in err and "did not close" not in err, err[-3000:]
    assert gone(pid)
    assert took < 3.5, f"{took:.1f} s from the first Ctrl-C to the exit"


def test_ctrl_c_twice_still_closes_the_cluster_and_says_how_to_resume(tmp_path):
    """A second Ctrl-C soon after the first (in the stop's clean-up or the
    cluster's close) cut the close short: distributed's atexit closed the
    cluster, waiting for the running tasks' threads (10 s), and the message
    lost the run folder -- `interrupted` alone (session 38)."""
    import signal
    from procs import reap, wait_for_file
    p = _run_of(tmp_path)
    pid = None
    try:
        pid = int(wait_for_file(str(tmp_path / "a.pid"), p, seconds=120))
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        # the second one once the first is recorded (meta.json), while the
        # run stops its tasks and closes its cluster
        end = time.monotonic() + 30
        while True:
            metas = glob.glob(str(tmp_path / "r" / "*" / "meta.json"))
            if metas and '"interrupted"' in open(metas[0]).read():
                break
            assert p.poll() is None and time.monotonic() < end, p.communicate()
            time.sleep(0.005)
        p.send_signal(signal.SIGINT)
        _stopped_in_time(tmp_path, p, pid, t0)
    finally:
        reap(p, pid)


# (sitecustomize of the runs below: the run's main thread sends itself
# SIGINT at one chosen point, SWEEP_TEST_FIRE_AT, once the test has
# written the run's pid to the file SWEEP_TEST_FIRE -- "logging": just
# after it takes logging's module lock to clear the loggers' level caches
# the second time (once the first has cleared them, another thread's next
# log call needs the lock); "shutdown": as the interpreter's shutdown
# begins, in threading._shutdown)
_FIRE = """
import logging, os, signal, sys, threading
_fire, _at = os.environ.get("SWEEP_TEST_FIRE"), os.environ.get("SWEEP_TEST_FIRE_AT")
def _fired():
    open(_fire + ".fired", "w").close()     # (the test checks it landed)
    os.kill(os.getpid(), signal.SIGINT)
def _ours():
    return (threading.current_thread() is threading.main_thread() and _fire
            and os.path.exists(_fire) and open(_fire).read() == str(os.getpid()))
class _Firing:
    clears = 0
    def __init__(self, lock):
        self._l = lock
    def acquire(self, *a, **k):
        got = self._l.acquire(*a, **k)
        if (got and _Firing.clears < 2 and _ours()
                and any(sys._getframe(d).f_code.co_name == "_clear_cache" for d in (1, 2, 3))):
            _Firing.clears += 1
            if _Firing.clears == 2:
                _fired()
        return got
    def release(self):
        self._l.release()
    def __enter__(self):
        return self.acquire()
    def __exit__(self, *e):
        self.release()
    def __getattr__(self, name):
        return getattr(self._l, name)
if _at == "logging":
    logging._lock = _Firing(logging._lock)
elif _at == "shutdown":
    _shutdown = threading._shutdown
    def _firing_shutdown():
        if _ours():
            _fired()
        _shutdown()
    threading._shutdown = _firing_shutdown
"""


def _fired_run(tmp_path, at):
    """_run_of with a SIGINT the run sends itself at `at` (_FIRE), armed
    once the first task runs: (the run, its task's pid, the file that arms
    it -- the caller writes the run's pid to it)."""
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "sitecustomize.py").write_text(_FIRE)
    fire = tmp_path / "fire"
    env = dict(os.environ, SWEEP_TEST_FIRE=str(fire), SWEEP_TEST_FIRE_AT=at,
               PYTHONPATH=os.pathsep.join(filter(None, [str(tmp_path / "site"),
                                                        os.environ.get("PYTHONPATH")])))
    return _run_of(tmp_path, env=env), fire


def test_ctrl_c_inside_a_logging_call_of_the_stop_does_not_hold_the_close(tmp_path):
    """The stop's clean-up (its meta.json write, the tasks' stop, quieting
    distributed's loggers) is the main thread's: a second Ctrl-C raised
    KeyboardInterrupt wherever it landed -- once inside logging's
    _acquireLock, after the lock was taken and before the try that releases
    it, and logging's lock stayed the main thread's: the scheduler's thread
    and the nanny's watcher waited for it for good, the client's and the
    cluster's close each waited out their 15 s (test_ctrl_c_twice... once
    43 s from the first Ctrl-C to the exit; a stack dump under
    PYTHONFAULTHANDLER showed the two threads in logging._acquireLock,
    session 39).  A stop in the clean-up is noted now, not raised.  Here the
    second Ctrl-C is made to land there every time: the run's main thread
    sends it to itself just after it takes logging's lock to clear the
    loggers' caches (setLevel), the second time after the first Ctrl-C."""
    import signal
    from procs import reap, wait_for_file
    p, fire = _fired_run(tmp_path, "logging")
    pid = None
    try:
        pid = int(wait_for_file(str(tmp_path / "a.pid"), p, seconds=120))
        fire.write_text(str(p.pid))
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        _stopped_in_time(tmp_path, p, pid, t0)
        # (it landed there: logging's internals as this test knows them)
        assert os.path.exists(f"{fire}.fired"), "the second Ctrl-C was never sent"
    finally:
        reap(p, pid)


def test_ctrl_c_once_the_stop_is_said_ends_the_process_quietly(tmp_path):
    """A Ctrl-C after the run has said how to resume (in the interpreter's
    shutdown: a user pressing it again and again) printed 'Exception
    ignored in: <module 'threading'>' and a KeyboardInterrupt traceback
    (one run in six of a burst of Ctrl-Cs, session 39).  It ends the
    process at once now, by SIGINT's default action, with nothing more
    said.  Here it lands as the shutdown begins, every time."""
    import signal
    from procs import gone, reap, wait_for_file
    p, fire = _fired_run(tmp_path, "shutdown")
    pid = None
    try:
        pid = int(wait_for_file(str(tmp_path / "a.pid"), p, seconds=120))
        fire.write_text(str(p.pid))
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=60)
        run = os.path.realpath(tmp_path / "r" / "latest")
        assert p.returncode == -signal.SIGINT, (p.returncode, out, err[-3000:])
        assert err.endswith(f"interrupted: heaplab run --resume {run}\n"), err[-3000:]
        assert "Traceback" not in err and "Exception ignored" not in err, err[-3000:]
        assert os.path.exists(f"{fire}.fired"), "the Ctrl-C in the shutdown was never sent"
        assert gone(pid)
    finally:
        reap(p, pid)


def _distributed_has_what_the_stop_tests_read():
    """The two tests below watch the sweep's local cluster through
    distributed's objects: a nanny's worker pid and state (Nanny.pid,
    Server.status and its Status names -- public attributes; no Client call
    says whether a nanny restarted its worker or closed) and the tasks the
    scheduler holds (Client.run_on_scheduler given SchedulerState.tasks, as
    run_on_scheduler's own documented example reads it).  A distributed
    release that renames one failed deep inside the wrapped run, where the
    stop's clean-up swallows exceptions: the test then said only "neither in
    30 s" or an empty answer.  Checked here first, named if gone."""
    import inspect

    import distributed
    from distributed.core import Server, Status
    from distributed.deploy.spec import SpecCluster
    from distributed.scheduler import SchedulerState
    needs = [
        ("Nanny.pid (its worker process's pid)",
         isinstance(getattr(distributed.Nanny, "pid", None), property)),
        ("Nanny.worker_address (heaplab.sweep._nannies)",
         isinstance(getattr(distributed.Nanny, "worker_address", None), property)),
        ("Nanny.close_gracefully (heaplab.sweep's stop)",
         callable(getattr(distributed.Nanny, "close_gracefully", None))),
        ("Server.status (a nanny's state)", isinstance(getattr(Server, "status", None), property)),
        ("Status.closing and Status.closed", {"closing", "closed"} <= set(Status.__members__)),
        ("SpecCluster.workers (a local cluster's nannies)",
         "self.workers = " in inspect.getsource(SpecCluster.__init__)),
        ("Client.run_on_scheduler", callable(getattr(distributed.Client, "run_on_scheduler", None))),
        ("SchedulerState.tasks (the tasks the scheduler holds)",
         "tasks" in getattr(SchedulerState, "__annotations__", {})),
    ]
    gone = [what for what, ok in needs if not ok]
    if gone:
        pytest.fail(f"distributed {distributed.__version__} has no {'; no '.join(gone)} -- "
                    f"renamed? This test reads it to watch the sweep's cluster: find its new "
                    f"name and change the test (test_sweep_resume.py)", pytrace=False)


def test_the_stop_tests_name_what_distributed_no_longer_has(monkeypatch):
    """A distributed that renamed Nanny.pid and SchedulerState.tasks: the two
    stop tests fail at once naming both, not deep in the wrapped run."""
    import distributed
    from distributed.scheduler import SchedulerState
    _distributed_has_what_the_stop_tests_read()         # (this one has them)
    monkeypatch.delattr(distributed.Nanny, "pid")
    monkeypatch.setattr(SchedulerState, "__annotations__",
                        {k: v for k, v in SchedulerState.__annotations__.items() if k != "tasks"})
    with pytest.raises(pytest.fail.Exception) as e:
        _distributed_has_what_the_stop_tests_read()
    assert str(e.value) == (
        f"distributed {distributed.__version__} has no Nanny.pid (its worker process's pid); no "
        f"SchedulerState.tasks (the tasks the scheduler holds) -- renamed? This test reads it to "
        f"watch the sweep's cluster: find its new name and change the test "
        f"(test_sweep_resume.py)"), str(e.value)


# (the run of the test below: heaplab run with sweep._ask_workers wrapped --
# as the stop asks the workers to kill their tasks' groups, each worker's
# process is killed first, and what its nanny did about it is written to
# TEST_OUT: "restarted" (a new worker process) or "closed")
_NANNY_RUN = """
import os, runpy, signal, sys, time
import heaplab.sweep as s
nannies, ask = {}, s._ask_workers
def _nannies(local, _real=s._nannies):
    nannies.update(_real(local))
    return nannies
def _ask_workers(client, fn, addrs, limit):
    if fn is s._kill_live_groups:
        said = [] if nannies else ["no nanny: heaplab.sweep._nannies found none (distributed's "
                                   "LocalCluster.workers or Nanny.worker_address renamed?)"]
        for n in nannies.values():
            pid = n.pid
            os.kill(pid, signal.SIGKILL)
            end = time.monotonic() + 30
            while time.monotonic() < end:
                if n.pid not in (None, pid):
                    said.append("restarted")
                    break
                if n.status.name in ("closing", "closed"):
                    said.append("closed")
                    break
                time.sleep(0.005)
            else:
                said.append("neither in 30 s: " + n.status.name)
        with open(os.environ["TEST_OUT"], "w") as f:
            f.write(" ".join(said))
    return ask(client, fn, addrs, limit)
s._nannies, s._ask_workers = _nannies, _ask_workers
sys.argv = ["heaplab", *sys.argv[1:]]
runpy.run_module("heaplab", run_name="__main__", alter_sys=True)
"""


def _wrapped_run(tmp_path, driver, out):
    """heaplab run of SLOW_ARM (arms a, b; one local worker) through `driver`
    (python -c: heaplab.sweep's functions wrapped, then heaplab's __main__),
    which writes what it saw to `out` (TEST_OUT)."""
    script = tmp_path / "arm.py"
    script.write_text(SLOW_ARM)
    return subprocess.Popen([sys.executable, "-c", driver, "run", "--command",
                             f"{sys.executable} {script} {{arm}} {tmp_path}", "--arms", "a,b",
                             "--results", str(tmp_path / "r"), "--workers", "1",
                             "--progress", "plain"], cwd=ROOT,
                            env=dict(os.environ, TEST_OUT=str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_as_in_a_terminal)


def _stopped_wrapped_run(tmp_path, driver):
    """_wrapped_run, stopped by a Ctrl-C once arm a runs, in time
    (_stopped_in_time); what the driver wrote to TEST_OUT."""
    import signal
    from procs import reap, wait_for_file
    out = tmp_path / "test_out"
    p = _wrapped_run(tmp_path, driver, out)
    pid = None
    try:
        pid = int(wait_for_file(str(tmp_path / "a.pid"), p, seconds=120))
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        _stopped_in_time(tmp_path, p, pid, t0)
        return out.read_text()
    finally:
        reap(p, pid)


def test_a_worker_that_dies_in_the_stop_is_not_started_again(tmp_path):
    """A stopped local sweep tells each worker's nanny to start no new
    worker before it asks the workers to kill their tasks: a worker that
    died in the stop (a SIGTERM to the whole group) was started again by its
    nanny, and the new one, not there yet to answer, was waited for 2 s and
    killed with a line saying it had not answered (h38sweep).  The SIGTERM
    test (test_a_terminals_ctrl_c_is_the_runs_alone) passed without it --
    the nanny saw the death before or after the stop told it, as it
    happened: the mutation audit's leftover (sessions 38-39).  Here the
    worker is killed just after the nannies were told, every time, and its
    nanny must close, not start another."""
    _distributed_has_what_the_stop_tests_read()
    said = _stopped_wrapped_run(tmp_path, _NANNY_RUN)
    assert said == "closed", said


# (the run of the test below: heaplab run with sweep._stop_local_tasks
# wrapped -- as the stop's clean-up reaches it, the tasks the scheduler
# still holds are written to TEST_OUT)
_HELD_RUN = """
import os, runpy, sys
import heaplab.sweep as s
stop = s._stop_local_tasks
def _stop_local_tasks(client, local, *a, **k):
    held = client.run_on_scheduler(lambda dask_scheduler: sorted(map(str, dask_scheduler.tasks)))
    with open(os.environ["TEST_OUT"], "w") as f:
        f.write(" ".join(held))
    return stop(client, local, *a, **k)
s._stop_local_tasks = _stop_local_tasks
sys.argv = ["heaplab", *sys.argv[1:]]
runpy.run_module("heaplab", run_name="__main__", alter_sys=True)
"""


def test_a_stopped_sweep_leaves_the_scheduler_no_task(tmp_path):
    """A stopped local sweep cancels its tasks before it kills the running
    ones' groups: a task left waiting was started by the worker as soon as
    the running one's group was killed, and the cluster's close waited 4 s
    for its thread (dask's grace) before it killed the worker.  The tests
    of the stop's time caught it only when the worker was quick enough to
    start the next task before the close (the mutation audit, session 40:
    1 of 2 runs).  Here the scheduler is asked, as the clean-up begins,
    which tasks it still holds: none."""
    _distributed_has_what_the_stop_tests_read()
    held = _stopped_wrapped_run(tmp_path, _HELD_RUN)
    assert held == "", f"the scheduler still holds {held}"


GO_ARM = """
import json, os, sys, time
arm, folder = sys.argv[1], sys.argv[2]
open(os.path.join(folder, arm + ".pid"), "w").write(str(os.getpid()))
while not os.path.exists(os.path.join(folder, "go")):
    time.sleep(0.01)
print(json.dumps({"experiment": "ECHO", "title": "echo", "arm": arm, "options": {},
                  "params": {}, "error": None, "notes": {}, "series": [],
                  "records": [{"experiment": "ECHO", "arm": arm, "phase": "p", "index": 0,
                               "phys_before": 1, "phys_after": 2, "phys_peak": 3}]}))
"""


def test_a_sweep_ends_with_an_idle_worker_that_cannot_answer(tmp_path):
    """At its end a sweep asks every worker what its host is (meta.json's
    workers_after) -- with no bound: an idle worker SIGSTOPped held a run
    whose tasks had all ended for good, its meta.json never saying it had
    finished (session 38).  Each worker gets 5 s (sweep.HOST_INFO_WAIT_S);
    one that does not answer is named on stderr and in meta.json."""
    import signal
    from procs import gone, parent_of, reap, wait_for_file
    p = _run_of(tmp_path, GO_ARM, arms="a", workers=2)
    idle = None
    try:
        arm = int(wait_for_file(str(tmp_path / "a.pid"), p, seconds=120))
        busy = parent_of(arm)
        (idle,) = [w for w in _children(p.pid, b"spawn_main") if w != busy]
        os.kill(idle, signal.SIGSTOP)
        t0 = time.monotonic()
        (tmp_path / "go").write_text("")
        try:
            out, err = p.communicate(timeout=40)
        except subprocess.TimeoutExpired:
            pytest.fail("no exit 40 s after the task could end (an idle worker stopped)")
        took = time.monotonic() - t0
        assert p.returncode == 0 and "1 ok, 0 failed" in out, (p.returncode, out, err[-3000:])
        run = os.path.realpath(tmp_path / "r" / "latest")
        with open(os.path.join(run, "meta.json")) as f:
            last = json.load(f)["runs"][-1]
        (addr,) = last["workers_unanswered_after"]
        assert last["finished"] and last["counts"]["ok"] == 1 and addr not in \
            last["workers_after"], last
        assert err == (f"heaplab run: warning: worker {addr} did not answer within 5 s "
                       "(stopped, or stuck in a call?): meta.json has no host information of "
                       "it (the run's `workers_unanswered_*`)\n"), err[-3000:]
        assert gone(idle), "the stopped worker outlived the run"
        assert took < 15, f"{took:.1f} s from the task's end to the exit"
    finally:
        if idle is not None and not gone(idle):
            os.kill(idle, signal.SIGKILL)
        reap(p)


# ---- a resume runs where the run ran, on the file it found ----------------------------------
# (the sweeps hunt, session 24: a --command's relative paths failed when the
# run was resumed from another directory; and an experiment file of the
# user's own -- Python or Lua -- was looked for by its name in heaplab's
# catalog, so that such a run could not be resumed at all, from anywhere)

FAIL_IF_ASKED = """
import json, os, sys
arm = sys.argv[1]
if os.path.exists("fail-" + arm):                 # (relative: in the task's directory)
    sys.exit("asked to fail")
print(json.dumps({"experiment": "ECHO", "title": "echo", "arm": arm, "options": {},
                  "params": {}, "error": None, "notes": {}, "series": [],
                  "records": [{"experiment": "ECHO", "arm": arm, "phase": "p", "index": 0,
                               "phys_before": 1, "phys_after": 2, "phys_peak": 3}]}))
"""

OWN_EXPERIMENT = """
import os
import heaplab
from heaplab.harness import Experiment
MINE = Experiment("MINE", "an experiment outside heaplab's catalog")


@MINE.arm("b")
@MINE.arm("a")
def arm(rec, **options):
    if os.path.exists("fail-" + rec.arm):
        raise RuntimeError("asked to fail")
    h = heaplab.Heap(**options)
    with rec.phase("fill", heap=h):
        h.fill(1 << 20, 64)
"""

OWN_LUA = """
local arm = arg[1]
if arm ~= "a" and arm ~= "b" then
  io.stderr:write("usage: lua5.4 mine.lua ARM (arms: a, b)\\n")
  os.exit(2)
end
local f = io.open("fail-" .. arm)
if f then f:close(); error("asked to fail") end
print(string.format('{"experiment": "MINE", "title": "mine", "arm": "%s", "options": {}, '
  .. '"params": {}, "error": null, "notes": {}, "series": [], "records": [{"experiment": '
  .. '"MINE", "arm": "%s", "phase": "p", "index": 0, "phys_before": 1, "phys_after": 2, '
  .. '"phys_peak": 3}]}', arm, arm))
"""


@pytest.mark.parametrize("kind", ["command", "python", "lua"])
def test_resume_from_elsewhere_runs_the_runs_tasks_where_it_ran(kind, tmp_path, on_cluster):
    home, elsewhere = tmp_path / "home", tmp_path / "elsewhere"
    home.mkdir()
    elsewhere.mkdir()
    if kind == "command":
        (home / "arm.py").write_text(FAIL_IF_ASKED)
        what = ["--command", f"{sys.executable} arm.py {{arm}}", "--arms", "a,b"]
    elif kind == "python":
        (home / "mine.py").write_text(OWN_EXPERIMENT)
        what = ["mine.py"]
    else:
        (home / "mine.lua").write_text(OWN_LUA)
        what = ["mine.lua"]
    (home / "fail-b").write_text("")

    def run(*args, cwd):
        return subprocess.run([sys.executable, "-m", "heaplab", "run", *args, *on_cluster],
                              cwd=cwd, capture_output=True, text=True, timeout=300)
    p = run(*what, "--results", str(tmp_path / "r"), cwd=home)
    assert p.returncode == 1 and "1 ok, 1 failed" in p.stdout, p.stdout + p.stderr
    run_dir = run_folder(p.stdout)
    (home / "fail-b").unlink()
    p = run("--resume", run_dir, cwd=elsewhere)
    assert p.returncode == 0 and "1 ok, 0 failed, 1 already complete" in p.stdout, \
        p.stdout + p.stderr
    assert {d["arm"]: d["sweep"]["status"] for d in records(run_dir).values()} == \
        {"a": "ok", "b": "ok"}
    # the run's directory gone (moved): a warning names it, and the tasks run
    # in the current one -- an experiment file gone with it is named too
    os.remove(glob.glob(os.path.join(run_dir, "*", "*", "a.r0.json"))[0])
    moved = tmp_path / "moved"
    home.rename(moved)
    (moved / "fail-a").write_text("")
    p = run("--resume", run_dir, cwd=moved)
    assert f"the run's working directory {home} is gone: its tasks run in {moved}" in p.stderr, \
        p.stdout + p.stderr
    if kind == "command":       # (it ran here: arm.py found, and fail-a)
        assert p.returncode == 1 and "0 ok, 1 failed, 1 already complete" in p.stdout, \
            p.stdout + p.stderr
    else:
        assert p.returncode == 2 and f"experiment file {home / what[0]} is gone" in p.stderr, \
            p.stdout + p.stderr
    assert "Traceback" not in p.stderr


def test_stop_on_signals_leaves_an_ignored_signal_ignored():
    """`nohup heaplab run ...` must outlive its terminal: SIGHUP ignored
    stays ignored; SIGTERM with its default action stops the run."""
    import signal
    from heaplab import sweep
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN), signal.getsignal(signal.SIGTERM)
    try:
        with sweep.stop_on_signals():
            assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
            with pytest.raises(sweep.Stopped) as e:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(100):        # (delivered at the next bytecode)
                    pass
            assert e.value.signum == signal.SIGTERM and isinstance(e.value, KeyboardInterrupt)
        assert signal.getsignal(signal.SIGTERM) == before[1]
    finally:
        signal.signal(signal.SIGHUP, before[0])


@pytest.mark.parametrize("signame,status,word", [("SIGINT", 130, "interrupted"),
                                                  ("SIGTERM", 143, "terminated")])
def test_a_stop_while_the_cluster_starts_is_one_line(signame, status, word, tmp_path):
    """A stop while the local cluster starts: raised inside LocalCluster(...)
    it left a half-built cluster to distributed's atexit (28 lines of
    AssertionError), inside a scheduler call a tornado traceback, and an
    empty run folder (the review, session 25).  It now waits until the run
    is on disk: one line, exit 128+N, meta.json saying where it stopped."""
    import signal
    p = _run_of(tmp_path, start_new_session=True)
    try:
        first = p.stdout.readline()          # printed just before the cluster starts
        assert first.startswith("heaplab run: "), first
        time.sleep(0.3)     # (into the cluster's start, which takes a second or two)
        p.send_signal(getattr(signal, signame))
        out, err = p.communicate(timeout=120)
        assert p.returncode == status, (p.returncode, out, err[-3000:])
        if not os.path.exists(tmp_path / "r" / "latest"):
            # (stopped before the cluster started: nothing on disk, nothing to resume)
            assert err == f"{word}\n" and not os.listdir(tmp_path / "r"), err[-3000:]
            return
        run = os.path.realpath(tmp_path / "r" / "latest")
        assert err == f"{word}: heaplab run --resume {run}\n", err[-3000:]
        with open(os.path.join(run, "meta.json")) as f:
            last = json.load(f)["runs"][-1]
        assert last["signal"] == signame and last["tasks_run"] == 0, last
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def _git_repo(path):
    path.mkdir()
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run(["git", "-C", str(path), *args], check=True, env=env)
    return subprocess.run(["git", "-C", str(path), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_meta_json_names_heaplabs_commit_and_the_experiment_files(tmp_path, on_cluster):
    """meta.json's `git` was the working directory's checkout: a user's own
    repository, run from there, stood in for heaplab's, and the experiment
    file's own checkout was not recorded (the installation hunt, session 26)."""
    mine, cwd = tmp_path / "mine", tmp_path / "cwd"
    mine_commit = _git_repo(mine)
    cwd_commit = _git_repo(cwd)
    (mine / "mine.py").write_text(OWN_EXPERIMENT)
    p = subprocess.run([sys.executable, "-m", "heaplab", "run", str(mine / "mine.py"), *on_cluster,
                        "--results", str(tmp_path / "r")], cwd=cwd, capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    with open(os.path.join(run_folder(p.stdout), "meta.json")) as f:
        meta = json.load(f)
    assert meta["experiment_git"] == {"commit": mine_commit, "dirty": False}, meta
    # heaplab's own: the checkout its installed package is in (tests/python
    # runs the package installed in this checkout's .venv), or null
    assert meta["git"] is None or meta["git"]["commit"] != cwd_commit, meta
    here = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True,
                          text=True).stdout.strip()
    import heaplab
    if os.path.realpath(heaplab.__file__).startswith(os.path.realpath(ROOT) + os.sep):
        assert meta["git"]["commit"] == here, meta
