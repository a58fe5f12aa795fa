"""A hostile pass over run_command_arm and `heaplab run` / `report` on
unusual but legal inputs (session 41): a command that forks and exits, a
phase script that raises, a sweep of one cell, env values with newlines, a
path with spaces.  Each test failed before its fix (the commit that added it
says how that was checked)."""
import os
import subprocess
import sys

import pytest

from heaplab.harness import run_command_arm

from procs import gone


def test_a_command_that_forks_and_exits_is_said_to_have_left_its_work(tmp_path):
    """A wrapper that starts the program and exits at once (`sh -c 'prog &'`,
    a server that daemonizes): the sampler followed the wrapper, the program
    was killed with the group when it exited, and the arm was a measurement
    of the wrapper -- rc 0, no error, no warning.  Now a warning names what
    it left running and what the figures leave out."""
    pidfile = tmp_path / "child.pid"
    data = run_command_arm(["sh", "-c", f"sleep 30 & echo $! > '{pidfile}'; exit 0"],
                           allocator="glibc", experiment="X", arm="a", timeout=20,
                           label="wrapper")
    assert data["error"] is None and data["returncode"] == 0, data["error"]
    child = int(pidfile.read_text())
    assert gone(child)
    assert data["warnings"] == [
        f"wrapper: the command ended (exit 0) and "
        f"left 1 process(es) it started running: pid {child} (sleep 30): killed -- only the "
        f"command's own process is sampled, so the figures leave out what they did (a wrapper "
        f"that starts the program and exits, a server that daemonizes: run the program itself, "
        f"in the foreground)"], data["warnings"]
    # a command stopped by the harness (its stop signal) leaves its helpers killed as before,
    # without the word: that is the stop, not the command leaving its work
    data = run_command_arm(["sh", "-c", "sleep 30 & wait"], allocator="glibc",
                           script=lambda ctl: None, experiment="X", arm="a", timeout=20)
    assert data["error"] is None and data["warnings"] == [], data
