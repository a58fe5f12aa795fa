"""Ctrl-C (KeyboardInterrupt) at awkward moments, session 26: the harness's
run_command_arm and Experiment.run, and the binding's Heap.close() /
Sampler.stop().  Each test runs its scenario in a child interpreter (a
SIGINT to pytest itself would stop the run) and failed before its fix (the
commit that added it says how that was checked)."""
import os
import signal
import subprocess
import sys
import textwrap

from procs import reap, wait_for_file


def _run(source, *args, timeout=60):
    """source run in a child interpreter: (returncode, stdout, stderr)."""
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(source), *map(str, args)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        reap(p)
        raise AssertionError(f"still running after {timeout} s") from None
    return p.returncode, out, err


# ---- run_command_arm: Ctrl-C reaches the script's thread -----------------------------------

SCRIPT_THREAD = """
    import os, sys, threading
    from heaplab.harness import run_command_arm
    tmp = sys.argv[1]
    ended = threading.Event()
    def script(ctl):
        try:
            with ctl.phase("work"):
                open(os.path.join(tmp, "started"), "w").write("1")
                while True:                  # short Python-level steps
                    threading.Event().wait(0.01)
        finally:
            ended.set()
    try:
        run_command_arm(["sleep", "60"], allocator="glibc", script=script, timeout=120)
        print("returned")
    except KeyboardInterrupt:
        # the docs: KeyboardInterrupt raised into the script's thread, 2 s to end
        print("script ended" if ended.wait(20) else "script still running")
"""


def test_ctrl_c_stops_a_run_command_arm_script(tmp_path):
    """The wait for the script's thread was a Thread.join(): interrupted by
    Ctrl-C, CPython 3.11 marks the thread stopped (bpo-45274), so the
    harness saw it gone and raised nothing into it -- the script ran on
    after run_command_arm had raised KeyboardInterrupt, every time."""
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(SCRIPT_THREAD), str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_file(tmp_path / "started", p)
        p.send_signal(signal.SIGINT)
        try:
            out, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            raise AssertionError("still running 60 s after the Ctrl-C") from None
        assert out.strip() == "script ended", (out, err[-3000:])
    finally:
        reap(p)
