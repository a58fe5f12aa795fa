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


def _gone(pid):
    """True once pid is no process (a zombie of ours counts as gone: it is
    reaped by its parent, which is what is checked)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _wait_for_file(path, proc, seconds=60):
    end = time.monotonic() + seconds
    while not os.path.exists(path) or not open(path).read().strip():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.01)
    return open(path).read().strip()


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
        pid = int(_wait_for_file(tmp_path / "pid", p))
        assert not _gone(pid)
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running 30 s after the Ctrl-C") from None
        assert out.strip() == "KeyboardInterrupt", (out, err[-2000:])
        assert _gone(pid), f"the command {pid} outlived the Ctrl-C"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if pid is not None and not _gone(pid):
            os.kill(pid, signal.SIGKILL)
