"""A hostile pass over the harness (session 11): heaplab.harness's
Experiment, run_command_arm and the arm's child process, and the sweep
command line, with bad input, failing commands and Ctrl-C.  Each test failed
before its fix (the commit that added it says how that was checked)."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from heaplab.harness import ArmFailed, run_command_arm

from procs import gone, pids_naming, reap, wait_for_file


# ---- run_command_arm with an allocator ----------------------------------------------------------

def test_command_arm_arguments_are_checked_before_anything_runs(tmp_path):
    """An empty cmd raised IndexError; a string cmd ran as a program's name;
    interval_s=0 sampled without sleeping (a CPU spinning until the command
    ended), a string one killed the sampler thread; a negative timeout gave
    an instant 'timeout'; stop_signal=999 raised a bare OSError -- and left
    the command running and its sampler thread with it."""
    marker = tmp_path / "ran"
    argv = ["sh", "-c", f"touch {marker}"]
    cases = [
        (dict(cmd=[]), ValueError, "cmd is empty"),
        (dict(cmd="sleep 30"), TypeError, "cmd must be a list"),
        (dict(cmd=["sleep", 30]), TypeError, "string or a path"),
        (dict(interval_s=0), ValueError, "interval_s must be a finite number of seconds > 0"),
        (dict(interval_s="0.1"), TypeError, "interval_s must be a number"),
        (dict(timeout=-1), ValueError, "timeout must be a finite number of seconds > 0"),
        (dict(timeout=float("nan")), ValueError, "timeout"),
        (dict(stop_signal=999), ValueError, "stop_signal 999: not a signal"),
        (dict(stop_signal="TERM"), TypeError, "stop_signal must be a signal number"),
        (dict(script=5), TypeError, "script must be callable"),
        (dict(options=["page_release"]), TypeError, "options must be a mapping"),
        # (the sampler's thread died of an OverflowError, unsaid: session 42)
        (dict(interval_s=1e300), ValueError,
         r"interval_s 1e\+300 s is longer than the arm's timeout \(600 s\)"),
    ]
    for kwargs, exc, needle in cases:
        kwargs = {"cmd": argv, "allocator": "glibc", **kwargs}
        with pytest.raises(exc, match=needle):
            run_command_arm(**kwargs)
        assert not marker.exists(), kwargs
    for kwargs, exc, needle in cases[:3] + cases[5:7]:
        with pytest.raises(exc, match=needle):
            run_command_arm(**{"cmd": argv, **kwargs})
        assert not marker.exists(), kwargs


def test_a_timeout_of_any_length_is_waited_for():
    """A timeout past epoll's 2^31 ms (24.8 days: a 30-day arm, or 1e300 s)
    raised OverflowError ('timeout is too large') from the arm form's wait,
    after its process had started; the select waits an hour at most now."""
    from heaplab.harness import add_progress_listener, remove_progress_listener
    ends = []
    told = add_progress_listener(lambda event, label, info: event == "end" and ends.append(info))
    try:
        arm = ["sh", "-c", "echo '{\"arm\": \"x\", \"records\": []}'"]
        for timeout in (30 * 86400, 1e300):
            data = run_command_arm(arm, timeout=timeout)
            assert data["returncode"] == 0 and data["records"] == [], data
            data = run_command_arm(["true"], allocator="glibc", timeout=timeout)
            assert data["error"] is None and data["returncode"] == 0, data
    finally:
        remove_progress_listener(told)
    # (the arm's time: the allocator arm's was time.monotonic() - (deadline - timeout),
    # the machine's uptime with 1e300)
    assert len(ends) == 4 and all(0 <= e["seconds"] < 60 for e in ends), ends


@pytest.mark.parametrize("argv, needle", [
    (["sh", "-c", "exit 3"], "the command failed (exit 3)"),
    (["sh", "-c", "kill -SEGV $$"], "the command failed (killed by SIGSEGV)"),
])
def test_a_command_that_fails_by_itself_is_an_error(argv, needle):
    """A command that crashed or exited non-zero by itself came back with
    error None: its phases looked like a measurement of the program."""
    data = run_command_arm(argv, allocator="glibc", timeout=60)
    assert data["error"] is not None and needle in data["error"], data["error"]
    # stopped by the harness (stop_signal) or exiting 0: no error
    ok = run_command_arm(["sleep", "30"], allocator="glibc", timeout=60,
                         script=lambda ctl: ctl.note("pid", ctl.pid))
    assert ok["error"] is None and ok["returncode"] == -signal.SIGTERM, ok["error"]
    assert run_command_arm(["true"], allocator="glibc", timeout=60)["error"] is None


CTRL_C = """
    import os, sys, time
    from heaplab.harness import run_command_arm
    tmp = sys.argv[1]
    def script(ctl):
        with open(os.path.join(tmp, "pid.tmp"), "w") as f:
            f.write(str(ctl.pid))
        os.rename(os.path.join(tmp, "pid.tmp"), os.path.join(tmp, "pid"))
        with ctl.phase("forever"):
            while True:
                time.sleep(0.01)
    try:
        # the command ignores SIGTERM: the harness's grace wait was the
        # whole timeout, and a second Ctrl-C there left it running
        run_command_arm(["sh", "-c", "trap '' TERM; while :; do sleep 0.05; done"],
                        allocator="glibc", script=script, timeout=600)
        print("returned")
    except KeyboardInterrupt:
        print("KeyboardInterrupt")
"""


def test_ctrl_c_in_a_script_kills_the_command_and_goes_on(tmp_path):
    """Ctrl-C in the middle of a sampled command's script was caught as the
    arm's error and swallowed (the caller's loop went on), and the command
    was given SIGTERM then up to `timeout` (600 s) to end, during which a
    second Ctrl-C left it running.  Now the command is killed at once, its
    sampler stopped, and KeyboardInterrupt goes on."""
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(CTRL_C), str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    pid = None
    try:
        pid = int(wait_for_file(tmp_path / "pid", p))
        assert not gone(pid)
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running 30 s after the Ctrl-C") from None
        assert out.strip() == "KeyboardInterrupt", (out, err[-2000:])
        assert gone(pid), f"the command {pid} outlived the Ctrl-C"
    finally:
        reap(p, pid)


# ---- the arm's process -------------------------------------------------------------------------

ARMS = """
import os
from heaplab.harness import Experiment
T = Experiment("T", "hostile arms")

@T.arm("prints")
def prints(rec, **options):
    with rec.phase("p"):
        print("hello from the arm")
        os.system("echo and from its subprocess")

@T.arm("bad_interval")
def bad_interval(rec, **options):
    with rec.phase("p"):
        pass
    rec.set_interval(-1)

@T.arm("bad_note")
def bad_note(rec, **options):
    with rec.phase("p"):
        pass
    with rec.phase("q") as ph:
        ph.note("x", object())
"""


def test_an_arm_that_prints_keeps_its_records(run_experiment_source, tmp_path):
    """stdout is the arm's JSON: a print() in an arm (or a subprocess
    writing to the inherited fd 1) spliced itself into it, and the arm
    failed with 'no JSON on stdout', its records lost."""
    res = run_experiment_source("hostile_prints", ARMS.split('@T.arm("bad_interval")')[0])
    assert [r["phase"] for r in res["prints"].records] == ["p"]
    assert res["prints"].data["error"] is None


@pytest.mark.parametrize("arm, needle", [
    ("bad_interval", "interval_s"),
    ("bad_note", "note 'x': the value must be JSON-serialisable"),
])
def test_an_arm_that_fails_late_keeps_its_records(run_experiment_source, tmp_path, arm, needle):
    """rec.set_interval(-1) stopped the arm's sampler before making the new
    one, and rec.note(key, object()) was found only when the child printed
    its JSON: either way the child died after the arm with a traceback, no
    JSON, and every record of the arm was lost."""
    # (the fixture calls T.run(save=True): this one runs the one arm)
    src = ARMS + f"\nT.run = (lambda run: lambda save: run(arms=[{arm!r}], save=save))(T.run)\n"
    with pytest.raises(ArmFailed, match="failed in its process") as info:
        run_experiment_source(f"hostile_{arm}", src)
    assert needle in str(info.value), str(info.value)[-2000:]
    with open(tmp_path / "results" / "T" / f"{arm}.json") as f:
        data = json.load(f)
    assert data["records"] and data["records"][0]["phase"] == "p", data
    assert needle in data["error"]


def _ok_arm(rec, **options):
    pass


def test_experiment_arguments_are_named(run_experiment_source):
    """Experiment(5, ...) and Experiment('../x', ...) were taken (the
    latter wrote its records outside the results folder); add_arm(name, 5)
    raised AttributeError '__module__'; run() of an experiment without arms
    raised a bare StopIteration, run(arms=[]) ran every arm, run(arms='on')
    ran arms 'o' and 'n', an unknown arm failed in the child with a
    KeyError traceback, and repeat='2' / timeout='5' gave TypeErrors about
    '<' and '+'."""
    from heaplab.harness import Experiment
    for args, exc, needle in [
        ((5, "t"), TypeError, "experiment name must be a string"),
        (("../x", "t"), ValueError, "experiment name '../x'"),
        (("", "t"), ValueError, "experiment name ''"),
        (("X", None), TypeError, "title must be a string"),
    ]:
        with pytest.raises(exc, match=needle):
            Experiment(*args)
    x = Experiment("X", "t")
    for args, kwargs, exc, needle in [
        (("a", 5), {}, TypeError, "fn must be a function"),
        ((5, _ok_arm), {}, TypeError, "arm name must be a string"),
        (("a", _ok_arm), {"params": [1]}, TypeError, "params must be a mapping"),
    ]:
        with pytest.raises(exc, match=needle):
            x.add_arm(*args, **kwargs)
    assert not x.arms
    with pytest.raises(ValueError, match="experiment X has no arms"):
        x.run()
    # two arms saved to one file: the second's records replaced the first's
    # and load_arms found one arm (redis/on beside redis_on)
    x.add_arm("redis/on", _ok_arm)
    with pytest.raises(ValueError, match="arm 'redis_on' and arm 'redis/on' would be saved to "
                                         "one file"):
        x.add_arm("redis_on", _ok_arm)
    assert list(x.arms) == ["redis/on"]
    # x.r1.json is a repeat's file of arm x: a run of x removed arm x.r1's
    # record as an earlier run of its own
    x.add_arm("x.r1", _ok_arm)
    with pytest.raises(ValueError, match=r"arm 'x.r1''s file \(x.r1.json\) is the name of a "
                                         r"repeat of arm 'x'"):
        x.add_arm("x", _ok_arm)
    assert list(x.arms) == ["redis/on", "x.r1"]
    x.arms.clear()
    src = ("from heaplab.harness import Experiment\nT = Experiment('T', 't')\n"
           "@T.arm('on')\n@T.arm('off')\ndef arm(rec, **options):\n    pass\n"
           "def run(save, _run=T.run):\n    return CASE\nT.run = run\n")
    for case, exc, needle in [
        ("_run(arms=[], save=save)", ValueError, "arms=\\[\\]: no arm to run"),
        ("_run(arms='on', save=save)", TypeError, "arms must be a list of arm names"),
        ("_run(arms=['on', 'middle'], save=save)", ValueError, "no arm\\(s\\) \\['middle'\\]"),
        ("_run(repeat='2', save=save)", TypeError, "repeat must be an int"),
        ("_run(timeout='5', save=save)", TypeError, "timeout must be a number"),
        ("_run(timeout=0, save=save)", ValueError, "timeout must be a finite number"),
    ]:
        with pytest.raises(exc, match=needle):
            run_experiment_source("hostile_args", src.replace("CASE", case))


@pytest.mark.parametrize("value", ["nan", "inf", "2.5", "0", "-1", "two"])
def test_a_bad_heaplab_repeat_is_named(run_experiment_source, monkeypatch, tmp_path, value):
    """HEAPLAB_REPEAT went through float() and int(): 2.5 ran 2 repeats,
    nan and inf raised ValueError / OverflowError about converting floats,
    naming neither the variable nor its value."""
    marker = tmp_path / "ran"
    monkeypatch.setenv("HEAPLAB_REPEAT", value)
    monkeypatch.setenv("REPEAT_MARKER", str(marker))
    src = ("import os\nfrom heaplab.harness import Experiment\nT = Experiment('T', 't')\n"
           "@T.arm('a')\ndef arm(rec, **options):\n"
           "    open(os.environ['REPEAT_MARKER'], 'a').close()\n")
    with pytest.raises(ValueError, match=f"HEAPLAB_REPEAT='{value}': expected a whole number"):
        run_experiment_source("hostile_repeat", src)
    assert not marker.exists(), "an arm ran"


def test_heaplab_repeat_takes_a_whole_number(run_experiment_source, monkeypatch):
    monkeypatch.setenv("HEAPLAB_REPEAT", " 2 ")
    src = ("from heaplab.harness import Experiment\nT = Experiment('T', 't')\n"
           "@T.arm('a')\ndef arm(rec, **options):\n    pass\n")
    assert len(run_experiment_source("hostile_repeat2", src)["a"].repeats) == 2


# ---- the sweep command line ----------------------------------------------------------------

def test_sweep_cli_refuses_a_bad_timeout_arms_or_results_before_any_cluster(tmp_path):
    """`heaplab run --timeout -5` started a cluster and failed every task
    ('no result within -5.0 s'), `--timeout 0` ran with 600 s; `--arms ,`
    named no arm and ran them all; `--results FILE` gave a
    NotADirectoryError traceback once the workers were up."""
    afile = tmp_path / "afile"
    afile.write_text("")
    results = str(tmp_path / "results")
    cmd = ["run", "--command", "true {arm}"]
    cases = [
        (cmd + ["--arms", "a", "--timeout", "-5", "--results", results], "--timeout -5.0"),
        (cmd + ["--arms", "a", "--timeout", "0", "--results", results], "--timeout 0.0"),
        (cmd + ["--arms", ",", "--results", results], "--arms names no arm"),
        (cmd + ["--arms", "a", "--results", str(afile)], f"--results {afile}: not a folder"),
        (cmd + ["--arms", "a", "--results", str(afile / "sub")], "cannot make the folder"),
    ]
    for args, needle in cases:
        p = subprocess.run([sys.executable, "-m", "heaplab", *args], capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 2 and needle in p.stderr, (args, p.stdout, p.stderr[-3000:])
        assert "Traceback" not in p.stderr and " ok, " not in p.stdout, (args, p.stdout)
    assert not os.path.exists(results)


UNGUARDED = """
from heaplab.harness import Experiment
EX = Experiment("UNGUARDED", "runs at import")

@EX.arm("a")
@EX.arm("b")
def arm(rec, **options):
    with rec.phase("p"):
        pass

EX.run(save=False)          # no `if __name__ == "__main__":`
print("ran to the end")
"""


def test_an_experiment_run_at_import_does_not_multiply(tmp_path):
    """A module that calls Experiment.run() at import, without the
    `__main__` guard: each arm's process imported it and ran the whole
    experiment again, whose arms did the same -- about 2,000 processes in
    2.5 minutes, each in a session of its own, going on after the script
    ended.  run() now refuses inside an arm's import: the arms fail, each
    saying why, and the script ends."""
    script = tmp_path / "unguarded.py"
    script.write_text(UNGUARDED)
    p = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "HEAPLAB_RESULTS": str(tmp_path / "results")})
    try:
        out, err = p.communicate(timeout=60)
    finally:
        # every process of the chain names the script (the arms' command
        # lines): the old code's are killed until none is left
        p.kill()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            left = pids_naming(str(script))
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
    assert p.returncode != 0 and "ran to the end" not in out, (p.returncode, out, err[-3000:])
    assert "run() called while an arm's process imports" in err, err[-3000:]
    assert "__main__" in err, err[-3000:]
