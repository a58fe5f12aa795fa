"""Helpers for the tests that start processes and check they are gone
(test_hostile_harness.py, test_harness_records.py), and the command of a
child pytest session."""
import os
import signal
import sys
import time

# A child pytest session (the tests of heaplab's pytest plugin, of the
# experiment suite's sessions): hypothesis's pytest plugin, an entry point
# every session loads, imports hypothesis whole at the session's end (its
# pytest_terminal_summary: hypothesis.internal.observability, hypothesis
# 6.170) -- 0.69 of the 1.11 CPU seconds of a one-test session on this
# project's venv, 43 child sessions in the Python tests.  No child session
# runs a hypothesis test: blocked, as in a project without hypothesis.  (The
# tests' own session keeps it: the model tests are hypothesis tests.)
PYTEST = (sys.executable, "-m", "pytest", "-p", "no:hypothesispytest")


def gone(pid):
    """True once pid is no process (a zombie of ours counts as gone: it is
    reaped by its parent, which is what is checked)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def parent_of(pid):
    """pid's parent (/proc/PID/stat's field 4), or None when pid is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return None


def wait_for_file(path, proc, seconds=60):
    """The stripped contents of path once it is written and not empty;
    fails if proc exits first or it takes longer than `seconds`."""
    end = time.monotonic() + seconds
    while not os.path.exists(path) or not open(path).read().strip():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < end, f"{path} never appeared"
        time.sleep(0.01)
    return open(path).read().strip()


def reap(proc, *pids, group=False):
    """A test's clean-up: proc killed and waited for if it still runs (with
    group, its whole process group: a pytest started in a session of its
    own), and each of pids (None: not known yet) killed if it is not gone."""
    if proc.poll() is None:
        if group:
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()
        proc.wait()
    for pid in pids:
        if pid is not None and not gone(pid):
            os.kill(pid, signal.SIGKILL)


def pids_naming(text):
    """The processes (not this one) whose command line holds text."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit() and int(d) != os.getpid():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    if text.encode() in f.read():
                        found.append(int(d))
            except OSError:
                pass
    return found
