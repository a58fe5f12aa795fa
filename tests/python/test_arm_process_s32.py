"""The arm's process (harness.py's _child_main and what runs it), as the
session-32 harness hunt found it: a thread left running, a fork inside a
phase, the experiment module's folder and multiprocessing, phase names,
processes that leave the arm's group, unbounded output, errors found only
after the arm ran."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

from heaplab import harness
from heaplab.harness import ArmFailed


# ---- a non-daemon thread left running (finding 4) -----------------------------------------

def test_a_thread_left_running_does_not_lose_the_arms_records(experiment_source):
    """The child wrote its complete JSON, then its interpreter's exit waited
    for the thread: "no result within T s", 0 records saved.  (The arm's
    process -- this module runs there -- gives the thread 0.5 s, not
    _THREAD_EXIT_GRACE_S's 3 s: the same path.)"""
    t = time.monotonic()
    mod = experiment_source("thr_left", textwrap.dedent("""
        import threading, time
        import __main__
        from heaplab.harness import Experiment
        if hasattr(__main__, "_child_main"):    # the arm's process: the harness is __main__
            __main__._THREAD_EXIT_GRACE_S = 0.5
        T = Experiment("XT", "threads")
        def a(rec, **o):
            with rec.phase("p"):
                threading.Thread(target=time.sleep, args=(1000,), name="sleeper").start()
        T.add_arm("nondaemon", a)
    """))
    res = mod.T.run(timeout=20)
    assert time.monotonic() - t < 15
    data = res["nondaemon"].data
    assert [r["phase"] for r in data["records"]] == ["p"] and data["error"] is None
    assert "non-daemon thread" in data["stderr_tail"] and "'sleeper'" in data["stderr_tail"]
    assert "still running 0.5 s after the arm had returned" in data["stderr_tail"], \
        data["stderr_tail"]


def test_an_idle_executor_left_running_does_not_skip_the_arms_exit(experiment_source, tmp_path):
    """The fix above ended the process with os._exit whenever a non-daemon
    thread was alive -- the idle workers of an executor never shut down,
    which the interpreter's exit stops itself, too: the arm's atexit
    handlers (coverage data, logging flushes, C destructors) were skipped."""
    mark = tmp_path / "atexit_ran"
    mod = experiment_source("idle_executor_s32", textwrap.dedent(f"""
        import atexit, concurrent.futures
        from heaplab.harness import Experiment
        T = Experiment("XE", "executor")
        def a(rec, **o):
            atexit.register(lambda: open({str(mark)!r}, "w").write("yes"))
            global ex
            ex = concurrent.futures.ThreadPoolExecutor(2)
            with rec.phase("p"):
                ex.submit(sum, [1, 2]).result()
        T.add_arm("a", a)
    """))
    data = mod.T.run(timeout=30)["a"].data
    assert data["error"] is None and [r["phase"] for r in data["records"]] == ["p"]
    assert "non-daemon thread" not in data["stderr_tail"]
    assert mark.read_text() == "yes"


def test_a_command_still_running_after_its_json_keeps_its_records():
    """run_command_arm at its timeout: a command that had printed its arm
    JSON and went on keeps its records, with the error."""
    doc = json.dumps({"arm": "x", "records": [{"phase": "p"}], "error": None})
    with pytest.raises(ArmFailed) as ei:
        harness.run_command_arm(["sh", "-c", f"echo '{doc}'; exec sleep 100"], timeout=1)
    data = ei.value.data
    assert data is not None and data["records"] == [{"phase": "p"}]
    assert "no result within 1" in data["error"] and "records are kept" in data["error"]
    assert "session" in data and "started" in data


# ---- a process forked inside a phase (finding 5) ------------------------------------------

@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
def test_a_forked_child_that_leaves_the_arm_writes_no_result(experiment_source):
    """A child forked in a phase that ended by sys.exit() or returned wrote a
    second JSON into the arm's pipe: "exit 0, no arm JSON on stdout"."""
    mod = experiment_source("fork_leaves", textwrap.dedent("""
        import os, sys
        from heaplab.harness import Experiment
        T = Experiment("XF", "fork")
        def sysexit(rec, **o):
            with rec.phase("p1"):
                pid = os.fork()
                if pid == 0:
                    sys.exit(3)
                rec.note("status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        def fallthrough(rec, **o):
            with rec.phase("p1"):
                pid = os.fork()
                if pid:
                    rec.note("status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
            with rec.phase("p2"):
                pass
        def raises(rec, **o):
            with rec.phase("p1"):
                pid = os.fork()
                if pid == 0:
                    raise RuntimeError("in the child")
                rec.note("status", os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        T.add_arm("sysexit", sysexit)
        T.add_arm("fallthrough", fallthrough)
        T.add_arm("raises", raises)
    """))
    res = mod.T.run(timeout=60)
    for arm, status, phases in (("sysexit", 3, ["p1"]), ("fallthrough", 0, ["p1", "p2"]),
                                ("raises", 1, ["p1"])):
        data = res[arm].data
        assert data["error"] is None, (arm, data["error"])
        assert [r["phase"] for r in data["records"]] == phases, arm
        assert data["notes"] == {"status": status}, arm
    assert "RuntimeError: in the child" in res["raises"].data["stderr_tail"]


# ---- the experiment module's folder and name (finding 6) ----------------------------------

def test_the_arms_module_sees_its_folder_and_multiprocessing_children_import_it(
        experiment_source, tmp_path, monkeypatch):
    """The arm's process loaded the module by path as `_heaplab_experiment`,
    its folder not on sys.path: a sibling import failed (from another cwd),
    and multiprocessing's spawn / forkserver children could not unpickle
    the module's functions ("No module named '_heaplab_experiment'"; a Pool
    hung until the arm's timeout)."""
    (tmp_path / "sib_helper_s32.py").write_text("SIZE = 7\n")
    mod = experiment_source("mp_module_s32", textwrap.dedent("""
        import multiprocessing as mp
        from heaplab.harness import Experiment
        T = Experiment("XM", "module")
        def child_work(q):
            q.put(("child", __name__))
        def a(rec, **o):
            import sib_helper_s32
            rec.note("size", sib_helper_s32.SIZE)
            rec.note("name", __name__)
            for method in ("spawn", "forkserver"):
                ctx = mp.get_context(method)
                q = ctx.Queue()
                p = ctx.Process(target=child_work, args=(q,))
                p.start()
                p.join(30)
                rec.note(method, [p.exitcode, list(q.get(timeout=5)) if p.exitcode == 0 else None])
        T.add_arm("a", a)
    """))
    monkeypatch.chdir("/")
    data = mod.T.run(timeout=90)["a"].data
    assert data["notes"] == {"size": 7, "name": "mp_module_s32",
                             "spawn": [0, ["child", "mp_module_s32"]],
                             "forkserver": [0, ["child", "mp_module_s32"]]}, data["stderr_tail"]


def test_the_module_name_falls_back_when_its_own_would_clash():
    assert harness._experiment_module_name("/x/exp_a.py") == "exp_a"
    for clash in ("/x/json.py", "/x/heaplab.py", "/x/my-exp.py", "/x/sys.py"):
        assert harness._experiment_module_name(clash) == "_heaplab_experiment", clash


# ---- a phase's name (finding 9) -----------------------------------------------------------

def test_a_phase_name_that_is_no_string_is_refused_at_the_call(experiment_source):
    """rec.phase(None) and ctl.phase(7) were taken, and the arm's JSON was
    unreadable later: `heaplab report` exited 2, "record 0 is not a phase
    record"."""
    mod = experiment_source("phase_names_s32", textwrap.dedent("""
        from heaplab.harness import Experiment
        T = Experiment("XP", "phase names")
        def a(rec, **o):
            for n in (None, 3, b"p", ""):
                try:
                    with rec.phase(n):
                        pass
                except (TypeError, ValueError) as e:
                    rec.note(repr(n), type(e).__name__)
            with rec.phase("ok"):
                pass
        T.add_arm("a", a)
    """))
    data = mod.T.run(timeout=60)["a"].data
    assert [r["phase"] for r in data["records"]] == ["ok"]
    assert data["notes"] == {"None": "TypeError", "3": "TypeError", "b'p'": "TypeError",
                             "''": "ValueError"}
    assert harness.load_arms(os.path.join(os.environ["HEAPLAB_RESULTS"], "XP"))

    def script(ctl):
        for n in (7, None, ""):
            with pytest.raises((TypeError, ValueError), match="phase's name"):
                ctl.phase(n)
        with ctl.phase("ok"):
            pass
    data = harness.run_command_arm(["sleep", "0.3"], allocator="glibc", script=script,
                                   timeout=30)
    assert data["error"] is None and [r["phase"] for r in data["records"]] == ["ok"]


# ---- processes that leave the arm's process group (finding 10) ----------------------------

def _setsid_sleep(duration):
    """A shell's `setsid sleep DURATION &`, then a wait until that child has
    exec'd sleep (until then it is `setsid sleep ...`, and before its
    setsid() still in the group) -- at most 10 s, else exit 3 saying so."""
    return (f"setsid sleep {duration} & i=0; "
            f"while [ \"$(cat /proc/$!/comm 2>/dev/null)\" != sleep ]; do "
            f"i=$((i+1)); if [ $i -gt 1000 ]; then "
            f"echo 'setsid sleep {duration} never showed up as sleep' >&2; exit 3; fi; "
            f"sleep 0.01; done")


def test_a_process_that_left_the_arms_group_does_not_outlive_the_arm(experiment_source):
    """setsid / start_new_session / a daemonizing server left the arm's
    process group, and the group kill at the arm's end missed it: it ran on,
    reparented to init (docs: the command "does not outlive the arm").  Now
    it is killed, and the arm's record says so; a helper that stayed in the
    group is killed with it, as before, and said since session 42 (the
    command arm's words: it ended and left it running).  The helpers'
    durations are this run's own (from its pid): two runs of the suite on
    the machine at once found and killed each other's."""
    import signal
    from procs import gone, pids_naming
    own = {k: f"{os.getpid()}.{i}1"
           for i, k in enumerate(("detached", "grouped", "command", "sampled"), 1)}
    mod = experiment_source("strays_s32", textwrap.dedent(f"""
        import subprocess
        from heaplab.harness import Experiment
        T = Experiment("XD", "strays")
        def a(rec, **o):
            with rec.phase("p"):
                subprocess.Popen(["sleep", "{own['detached']}"], start_new_session=True,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                subprocess.Popen(["sleep", "{own['grouped']}"], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL)
        T.add_arm("a", a)
    """))
    cmd = _setsid_sleep(own["command"]) + "; echo '{\"arm\": \"x\", \"records\": []}'"

    def cmdline(pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                return f.read()
        except OSError:
            return b""

    def running():      # (exactly these commands: not `setsid sleep ...`, not another run's)
        return {k: [p for p in pids_naming(f"sleep\0{d}\0") if not gone(p)
                    and cmdline(p) == f"sleep\0{d}\0".encode()]
                for k, d in own.items()}
    try:
        data = mod.T.run(timeout=60)["a"].data
        command = harness.run_command_arm(["sh", "-c", cmd], timeout=30)
        sampled = harness.run_command_arm(["sh", "-c", _setsid_sleep(own["sampled"])],
                                          allocator="glibc", timeout=30)
        assert sampled["error"] is None, sampled["stderr_tail"]
        end = time.monotonic() + 10      # (a SIGKILL is delivered, not waited for)
        while any(running().values()) and time.monotonic() < end:
            time.sleep(0.01)
        assert not any(running().values()), running()
        # (the helper that stayed in the group is named too, as a command arm's is: h42left,
        # session 42 -- it was killed unsaid)
        assert len(data["warnings"]) == 2 and f"(sleep {own['detached']})" in data["warnings"][0]
        assert own["grouped"] not in data["warnings"][0]
        assert "pid " in data["warnings"][1] and f"(sleep {own['grouped']})" in \
            data["warnings"][1] and "left 1 process(es) it started running" in data["warnings"][1]
        assert f"(sleep {own['command']})" in command["warnings"][0]
        assert any(f"(sleep {own['sampled']})" in w for w in sampled["warnings"])
    finally:
        for d in own.values():
            for p in pids_naming(f"sleep\0{d}\0"):
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_the_stray_scan_reads_the_environment_only_of_processes_started_since_the_arm(
        monkeypatch):
    """_kill_tagged read /proc/PID/environ (the process's mmap_lock: one
    stuck in a fault held up the scan, which Ctrl-C cannot break) and
    pidfd_open()ed every process on the machine.  Now one that started
    before the arm, or is another user's, is passed over on its
    /proc/PID/stat; a tagged process started since is still killed."""
    import signal
    older = subprocess.Popen(["sleep", "300"])
    try:
        time.sleep(0.05)        # (some clock ticks: it started before the tag)
        env, tag = harness._tagged_env(None)
        stray = subprocess.Popen(["sleep", "301"], env=env, start_new_session=True)
        read, opened = [], []
        real_open, real_pidfd = open, os.pidfd_open

        def spy_open(path, *a, **k):
            if str(path).endswith("/environ"):
                read.append(int(str(path).split("/")[2]))
            return real_open(path, *a, **k)

        def spy_pidfd(pid, *a):
            opened.append(pid)
            return real_pidfd(pid, *a)
        monkeypatch.setattr(harness, "open", spy_open, raising=False)
        monkeypatch.setattr(os, "pidfd_open", spy_pidfd)
        killed = harness._kill_tagged(tag, None)
        monkeypatch.undo()
        assert killed == [f"pid {stray.pid} (sleep 301)"]
        assert stray.wait(10) == -signal.SIGKILL
        assert older.pid not in read and older.pid not in opened
        assert 1 not in read and 1 not in opened
        assert stray.pid in read
        others = set(read) - {stray.pid}
        assert all(harness._proc_stat(p) is None or int(harness._proc_stat(p)[19]) >=
                   int(tag.split(".")[1]) for p in others), others
    finally:
        older.kill()
        older.wait()


def test_a_stray_caught_inside_its_exec_is_read_again(monkeypatch):
    """A process inside an exec -- its new memory in place, its stack and
    environment not yet -- reads as an empty /proc/PID/environ with env_end
    (stat field 51) 0, and Popen has returned by then (its pipe closes at
    exec's point of no return: 5% of 2000 Popens read at once under load).
    The scan passed it over as untagged and ended, and it outlived the arm:
    the test above failed 1 of ~12 under make test -- likely so: pids wrap
    at 32768 there, and a new process with a low pid comes early in the
    scan (a tagged sleep read first, two busy loops: 11 of 1000 missed
    before, 0 of 1000 after).  Here the stray reads so until the scan's
    first wait."""
    import io
    import signal
    env, tag = harness._tagged_env(None)
    stray = subprocess.Popen(["sleep", "302"], env=env, start_new_session=True)
    try:
        real_open, real_sleep = open, time.sleep
        inside = [True]

        def spy_open(path, *a, **k):
            if inside[0] and str(path) == f"/proc/{stray.pid}/environ":
                return io.BytesIO(b"")
            if inside[0] and str(path) == f"/proc/{stray.pid}/stat":
                with real_open(path, "rb") as f:
                    head, tail = f.read().rsplit(b")", 1)
                fields = tail.split()
                fields[48] = b"0"           # (field 51, env_end: not set up yet)
                return io.BytesIO(head + b") " + b" ".join(fields) + b"\n")
            return real_open(path, *a, **k)

        def spy_sleep(s):
            inside[0] = False               # (the exec is done by the next round)
            real_sleep(s)
        monkeypatch.setattr(harness, "open", spy_open, raising=False)
        monkeypatch.setattr(harness.time, "sleep", spy_sleep)
        killed = harness._kill_tagged(tag, None)
        monkeypatch.undo()
        assert killed == [f"pid {stray.pid} (sleep 302)"], killed
        assert stray.wait(10) == -signal.SIGKILL
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()


def test_the_stray_scan_returns_once_what_it_killed_is_gone(monkeypatch):
    """A SIGKILL is asynchronous: the killed process runs its exit, tearing
    its memory down -- 35 ms a GiB here.  _kill_tagged re-scanned while it
    found the stray alive, 8 rounds 10 ms apart: a stray slower to die (a
    few GiB) outlived its return.  Now it waits on the killed processes'
    pidfds (_wait_killed_gone, 10 s at most).  The slow exit is made here by
    a kill that lands 1 s after the call (a timer thread sends it): the old
    rounds returned ~0.1 s in, the stray still running."""
    import signal
    import threading
    from procs import gone
    env, tag = harness._tagged_env(None)
    stray = subprocess.Popen(["sleep", "304"], env=env, start_new_session=True)
    real_send = signal.pidfd_send_signal
    timers = []

    def late_send(fd, sig, *a):
        mine = os.dup(fd)                   # (_kill_tagged closes its own)

        def send():
            try:
                real_send(mine, sig)
            finally:
                os.close(mine)
        t = threading.Timer(1.0, send)
        t.start()
        timers.append(t)
    try:
        monkeypatch.setattr(signal, "pidfd_send_signal", late_send)
        t0 = time.monotonic()
        killed = harness._kill_tagged(tag, None)
        took = time.monotonic() - t0
        monkeypatch.undo()
        assert killed == [f"pid {stray.pid} (sleep 304)"], killed
        assert gone(stray.pid), f"_kill_tagged returned after {took:.3f} s, the stray running"
        assert took >= 0.9, took
        assert stray.wait(10) == -signal.SIGKILL
    finally:
        for t in timers:
            t.join()
        if stray.poll() is None:
            stray.kill()
            stray.wait()


def test_the_stray_scan_kills_without_pidfds_on_an_older_kernel(monkeypatch):
    """os.pidfd_open exists but the kernel has no pidfd_open (before Linux
    5.3: ENOSYS): the scan took that for the process being gone and killed
    no stray.  It kills with os.kill then, and waits on /proc/PID/stat."""
    import errno
    import signal
    from procs import gone
    env, tag = harness._tagged_env(None)
    stray = subprocess.Popen(["sleep", "305"], env=env, start_new_session=True)

    def no_pidfd(pid, *a):
        raise OSError(errno.ENOSYS, "Function not implemented")
    try:
        monkeypatch.setattr(os, "pidfd_open", no_pidfd)
        killed = harness._kill_tagged(tag, None)
        monkeypatch.undo()
        assert killed == [f"pid {stray.pid} (sleep 305)"], killed
        assert gone(stray.pid)
        assert stray.wait(10) == -signal.SIGKILL
    finally:
        if stray.poll() is None:
            stray.kill()
            stray.wait()


def test_the_wait_for_what_was_killed_is_bounded_and_needs_no_pidfd():
    """_wait_killed_gone: True once every process given has exited (a zombie
    counts: its memory is given back), by its pidfd or, without one, by
    /proc/PID/stat (its starttime: not a reused pid); False at its deadline
    with one still running -- and the pidfds closed either way."""
    from procs import gone

    def started(*argv):
        p = subprocess.Popen(list(argv))
        return p, harness._proc_stat(p.pid)[19]
    quick, q_start = started("sleep", "0.3")
    quick2, q2_start = started("sleep", "0.3")
    stays, s_start = started("sleep", "30")
    try:
        fds = [os.pidfd_open(quick.pid), os.pidfd_open(stays.pid)]
        t0 = time.monotonic()
        assert harness._wait_killed_gone([(quick.pid, fds[0], q_start),
                                          (quick2.pid, None, q2_start)], t0 + 10)
        took = time.monotonic() - t0
        assert gone(quick.pid) and gone(quick2.pid) and 0.2 <= took < 10, took
        t0 = time.monotonic()
        assert not harness._wait_killed_gone([(stays.pid, fds[1], s_start)], t0 + 0.2)
        took = time.monotonic() - t0
        assert 0.2 <= took < 5 and not gone(stays.pid), took
        for fd in fds:
            with pytest.raises(OSError):
                os.fstat(fd)
        t0 = time.monotonic()
        assert not harness._wait_killed_gone([(stays.pid, None, s_start)], t0 + 0.1)
        assert 0.1 <= time.monotonic() - t0 < 5
    finally:
        for p in (quick, quick2, stays):
            p.kill()
            p.wait()


# ---- the output kept of a process (finding 11) --------------------------------------------

_PEAK = """
import sys
from heaplab import harness
big = "import sys\\nfor i in range(100): sys.stdout.write('y' * 1000000); sys.stderr.write('z' * 1000000)\\nsys.stderr.write('END')"
try:
    d = harness.run_command_arm(["python3", "-c", big], timeout=120, **eval(sys.argv[1]))
    print("RET", repr(d["error"]), len(d.get("stdout_tail", "")), d["stderr_tail"][-3:])
except harness.ArmFailed as e:
    print("EXC", str(e)[:400].replace("\\n", " "))
# (VmHWM, this image's own peak: ru_maxrss keeps the peak of the process
# before its exec -- a fork of a large pytest)
hwm = [ln for ln in open("/proc/self/status") if ln.startswith("VmHWM:")][0]
print("PEAK_MIB", int(hwm.split()[1]) // 1024)
"""


@pytest.mark.parametrize("kw", ["{}", "{'allocator': 'glibc'}"])
def test_a_commands_output_is_kept_within_bounds(kw, tmp_path):
    """stdout and stderr were kept whole (a pipe's, or read whole from the
    sampled form's files) though only a tail is used: 200 MB of output made
    the harness some 600 MB resident.  Now stdout is an arm's JSON up to
    STDOUT_LIMIT (past it the arm fails saying so) and of stderr the ends
    are kept."""
    p = subprocess.run([sys.executable, "-c", _PEAK, kw], capture_output=True, text=True,
                       timeout=300, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    peak = int(p.stdout.split("PEAK_MIB")[1])
    assert peak < 150, p.stdout
    if kw == "{}":
        assert "EXC" in p.stdout and "STDOUT_LIMIT" in p.stdout and "stdout began: yyy" in p.stdout
    else:
        assert "RET None 2000 END" in p.stdout, p.stdout


def test_stderr_keeps_its_beginning_and_its_end():
    code = ("import sys; sys.stderr.write('FIRST' + 'z' * 3000000 + 'LAST'); "
            "print('{\"arm\": \"x\", \"records\": []}')")
    data = harness.run_command_arm([sys.executable, "-c", code], timeout=60)
    assert data["stderr_tail"].endswith("LAST")
    run = harness._GroupRun([sys.executable, "-c", code], None, None)
    run.wait(time.monotonic() + 60)
    run.finish(9)
    out, err = run.output()
    assert err.startswith("FIRST") and err.endswith("LAST") and "bytes of stderr not kept" in err
    assert len(err) < 2 * harness.STDERR_KEPT + 70000      # (+ one read of 64 KiB)


def test_the_stdout_limit_is_set_by_a_variable_the_error_names(monkeypatch):
    """STDOUT_LIMIT was fixed at 32 MiB: an arm whose JSON is legitimately
    bigger (long note lists) lost every record, and nothing could be set.
    HEAPLAB_STDOUT_LIMIT sets it (a tool's variable: libheaplab does not warn
    about it), and the error names it."""
    code = ("import json; print(json.dumps({'arm': 'x', 'records': [], 'error': None, "
            "'notes': {'big': 'n' * 200000}}))")
    monkeypatch.setenv("HEAPLAB_STDOUT_LIMIT", "100000")
    with pytest.raises(ArmFailed, match=r"more than an arm's JSON may hold \(100000 bytes: "
                                        r"HEAPLAB_STDOUT_LIMIT.*HEAPLAB_STDOUT_LIMIT=BYTES"):
        harness.run_command_arm([sys.executable, "-c", code], timeout=60)
    monkeypatch.setenv("HEAPLAB_STDOUT_LIMIT", "300000")
    data = harness.run_command_arm(        # (a heap reads the environment: no warning)
        [sys.executable, "-c", "import heaplab; heaplab.Heap().close(); " + code], timeout=60)
    assert data["error"] is None and len(data["notes"]["big"]) == 200000
    assert "not an option" not in data["stderr_tail"], data["stderr_tail"]
    for bad in ("lots", "1e6", "100", "-5"):
        monkeypatch.setenv("HEAPLAB_STDOUT_LIMIT", bad)
        with pytest.raises(ValueError, match=f"HEAPLAB_STDOUT_LIMIT='{bad}': expected a whole "
                                             f"number of bytes, at least 4096"):
            harness.run_command_arm([sys.executable, "-c", code], timeout=60)
    monkeypatch.setenv("HEAPLAB_STDOUT_LIMIT", "")
    assert harness._stdout_limit() == harness.STDOUT_LIMIT == 32 * 1024 * 1024


# ---- errors found only after the arm ran (finding 12) -------------------------------------

def test_a_results_folder_that_cannot_be_written_is_refused_before_the_arm_runs(
        experiment_source, tmp_path, monkeypatch):
    """HEAPLAB_RESULTS under a file: the arm ran, then NotADirectoryError at
    its save, its records lost."""
    mod = experiment_source("unsaved_s32", textwrap.dedent(f"""
        from heaplab.harness import Experiment
        T = Experiment("XS", "unsaved")
        def a(rec, **o):
            open({str(tmp_path / "ran")!r}, "w").close()
        T.add_arm("a", a)
    """))
    (tmp_path / "afile").write_text("")
    monkeypatch.setenv("HEAPLAB_RESULTS", str(tmp_path / "afile" / "sub"))
    with pytest.raises(ValueError, match=r"XS: its records cannot be saved .*afile.*no arm was run"):
        mod.T.run(timeout=60)
    monkeypatch.setenv("HEAPLAB_RESULTS", str(tmp_path / "res"))
    (tmp_path / "res").mkdir()
    (tmp_path / "res" / "XS").write_text("")      # the experiment's folder is a file
    with pytest.raises(ValueError, match="not a folder"):
        mod.T.run(timeout=60)
    assert not (tmp_path / "ran").exists()
    mod.T.run(timeout=60, save=False)             # (nothing to save: runs)
    assert (tmp_path / "ran").exists()


def test_an_arm_name_too_long_for_its_file_is_refused_when_declared(experiment_source,
                                                                   tmp_path):
    """'x' * 300 ran, then its save failed "File name too long"."""
    mod = experiment_source("long_names_s32", textwrap.dedent("""
        from heaplab.harness import Experiment
        T = Experiment("XL", "long names")
        def a(rec, **o):
            with rec.phase("p"):
                pass
        T.add_arm("x" * 200, a)         # (ARM_NAME_MAX)
    """))
    with pytest.raises(ValueError, match=r"at most 200 bytes .*ARM_NAME_MAX"):
        mod.T.add_arm("x" * 300, mod.a)
    with pytest.raises(ValueError, match="ARM_NAME_MAX"):
        mod.T.add_arm("é" * 101, mod.a)           # (202 bytes)
    mod.T.run(timeout=60, repeat=2)               # the longest allowed saves
    saved = sorted(os.listdir(tmp_path / "results" / "XL"))
    assert f"{'x' * 200}.r0.json" in saved and f"{'x' * 200}.r1.json" in saved


def test_an_experiment_declared_in_python_c_says_what_it_needs(tmp_path):
    """Experiment.add_arm in a REPL, python -c, a notebook: AttributeError
    "module '__main__' has no attribute '__file__'".  Declaring works; run()
    says what is needed."""
    code = textwrap.dedent("""
        from heaplab.harness import Experiment
        E = Experiment("XR", "repl")
        def a(rec, **o):
            pass
        E.add_arm("a", a)
        print("declared", list(E.arms))
        try:
            E.run()
        except RuntimeError as e:
            print("RUN", e)
    """)
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       cwd=tmp_path, env=dict(os.environ, HEAPLAB_RESULTS=str(tmp_path)))
    assert "declared ['a']" in p.stdout, p.stderr
    assert "RUN experiment XR: its arms are functions of module '__main__', which has no file" \
        in p.stdout, p.stdout + p.stderr
