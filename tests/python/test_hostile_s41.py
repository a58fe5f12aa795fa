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


# The shell's child for `sleep 30 &` is `sh -c ...` until it has exec'd sleep: a wrapper
# that exits at once left it named so in 1 run of 10 (h42left, session 42); the wrapper waits
# for the exec (10 s at most, else exit 3 saying so), as test_arm_process_s32's setsid does.
_EXECD = ("i=0; while [ \"$(cat /proc/$!/comm 2>/dev/null)\" != sleep ]; do i=$((i+1)); "
          "if [ $i -gt 1000 ]; then echo 'sleep never showed up' >&2; exit 3; fi; "
          "sleep 0.01; done")


def test_a_command_that_forks_and_exits_is_said_to_have_left_its_work(tmp_path):
    """A wrapper that starts the program and exits at once (`sh -c 'prog &'`,
    a server that daemonizes): the sampler followed the wrapper, the program
    was killed with the group when it exited, and the arm was a measurement
    of the wrapper -- rc 0, no error, no warning.  Now a warning names what
    it left running and what the figures leave out."""
    pidfile = tmp_path / "child.pid"
    data = run_command_arm(["sh", "-c", f"sleep 30 & echo $! > '{pidfile}'; {_EXECD}; exit 0"],
                           allocator="glibc", experiment="X", arm="a", timeout=20,
                           label="wrapper")
    assert data["error"] is None and data["returncode"] == 0, data["error"]
    child = int(pidfile.read_text())
    assert gone(child)
    left = (f"wrapper: the command ended (exit 0) and "
            f"left 1 process(es) it started running: pid {child} (sleep 30): killed -- only the "
            f"command's own process is sampled, so the figures leave out what they did (a "
            f"wrapper that starts the program and exits, a server that daemonizes: run the "
            f"program itself, in the foreground)")
    # (and, on a slow machine, the sampler's own word that the command ended before its
    # second sample -- make coverage's instrumented build, session 41)
    assert left in data["warnings"] and all(
        w == left or "before 2 samples were taken" in w for w in data["warnings"]), \
        data["warnings"]
    # a command stopped by the harness (its stop signal) leaves its helpers killed as before,
    # without the word: that is the stop, not the command leaving its work
    data = run_command_arm(["sh", "-c", "sleep 30 & wait"], allocator="glibc",
                           script=lambda ctl: None, experiment="X", arm="a", timeout=20)
    assert data["error"] is None and data["warnings"] == [], data


def test_what_the_arm_killed_is_gone_when_it_returns(tmp_path):
    """The group's SIGKILL is asynchronous: what the command left running was
    killed, and run_command_arm returned while it still ran its exit (the
    test above saw the `sleep 30` alive right after, 1 failure under make
    test's load, session 44).  A process with 1 GiB to tear down is still
    running ~35 ms after its SIGKILL here: the harness waits until the
    group's members are gone (harness._wait_group_gone)."""
    pidfile = tmp_path / "big.pid"
    big = tmp_path / "big.py"
    big.write_text("import os, time\n"
                   "b = b'x' * (1 << 30)\n"
                   f"with open({str(pidfile)!r} + '.tmp', 'w') as f:\n"
                   "    f.write(str(os.getpid()))\n"
                   f"os.rename({str(pidfile)!r} + '.tmp', {str(pidfile)!r})\n"
                   "time.sleep(60)\n")
    data = run_command_arm(["sh", "-c", f"'{sys.executable}' '{big}' & "
                            f"while [ ! -e '{pidfile}' ]; do sleep 0.01; done; exit 0"],
                           allocator="glibc", experiment="X", arm="a", timeout=60,
                           label="bigchild")
    child = int(pidfile.read_text())
    assert gone(child), f"pid {child} (1 GiB) still there when the arm returned"
    assert data["error"] is None and any(f"pid {child}" in w for w in data["warnings"]), data


def test_an_arm_command_that_forks_and_exits_is_said_to_have_left_its_work(tmp_path):
    """The arm form (no allocator: the command prints its own arm JSON) killed
    what the command left running in its group without a word, where the
    allocator arms said so (above).  Now the same words, from the same code
    (harness._left_running_warning; h42left, session 42)."""
    pidfile = tmp_path / "child.pid"
    data = run_command_arm(["sh", "-c", f"sleep 30 & echo $! > '{pidfile}'; {_EXECD}; "
                            "echo '{\"arm\": \"x\", \"records\": []}'"],
                           timeout=20, label="wrapper")
    assert data["returncode"] == 0 and not data.get("error"), data
    child = int(pidfile.read_text())
    assert gone(child)
    assert data["warnings"] == [
        f"wrapper: the command ended (exit 0) and left 1 process(es) it started running: "
        f"pid {child} (sleep 30): killed -- its records are the arm's own process's, and what "
        f"they did after it ended was cut short (a wrapper that starts the arm and exits: run "
        f"the arm itself)"], data["warnings"]
    # one that waits for what it started leaves nothing: no word
    data = run_command_arm(["sh", "-c", "sleep 0.1 & wait; echo '{\"arm\": \"x\", "
                            "\"records\": []}'"], timeout=20, label="waits")
    assert not data.get("warnings"), data["warnings"]


def test_a_report_of_records_without_duration_s_completes(tmp_path, capsys, monkeypatch):
    """An arm JSON with footprints and no duration_s (a --command arm's own,
    another tool's: the harness does not require it) stopped the report
    part-way at the phase-cost plot -- "no figure(s) ['duration_s'] in its
    records ...; the report ... is incomplete ...; run heaplab report again",
    which stopped there again.  The results folder's report and a sweep
    run's (of one cell) now draw the plot of what there is and say what is
    not."""
    import glob
    import json
    from heaplab.__main__ import main
    from test_analysis_s39 import _arm, _results
    from test_analysis_s40 import _with_figures
    from test_compare_grids import make_run
    from heaplab import analysis as hla
    from heaplab.harness import write_atomic
    # (the figures are made, not drawn: the PNGs' pixels are no part of this)
    monkeypatch.setattr(hla, "_save_figure", lambda fig, path, dpi: write_atomic(path, b""))
    on, off = _arm("E1", "on", 20), _arm("E1", "off", 40)
    for a in (on, off):
        del a["records"][0]["duration_s"]
    res = _results(tmp_path / "res", on, off)
    assert main(["report", str(res)]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "E1: no duration_s in its records; the phase-cost plot shows phys_growth alone" \
        in out, out
    assert (res / "report" / "E1_phase_cost.png").exists()
    run = _with_figures(make_run(tmp_path / "run", {"warm_pages": ["0"]}, lambda v: 1.0))
    for path in glob.glob(os.path.join(run, "E1", "*", "*.json")):
        with open(path) as f:
            d = json.load(f)
        del d["records"][0]["duration_s"]
        with open(path, "w") as f:
            json.dump(d, f)
    assert main(["report", run]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "E1: no duration_s in its records; the phase-cost plot shows phys_growth alone" \
        in out, out
    assert os.path.exists(os.path.join(run, "report", "E1_c000_phase_cost.png"))
    assert not os.path.exists(os.path.join(run, "report", "INCOMPLETE-REPORT.txt"))
    # effects and no phase figure at all: no phase-cost plot, said (it refused, exit 2)
    run = make_run(tmp_path / "bare", {"warm_pages": ["0"]}, lambda v: 1.0)
    assert main(["report", run]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "E1: no phys_growth or duration_s in its records; no phase-cost plot" in out, out
    assert not os.path.exists(os.path.join(run, "report", "E1_c000_phase_cost.png"))


@pytest.mark.parametrize("env, said", [
    ({"FOO": "a\0b"}, "env FOO='a\\x00b': a NUL byte in the value (no environment variable can "
                      "hold one)"),
    ({"FO=O": "x"}, "env 'FO=O': not an environment variable's name (empty, or an '=' or a NUL "
                    "byte in it)"),
    ({"": "x"}, "env '': not an environment variable's name (empty, or an '=' or a NUL byte in "
                "it)"),
], ids=["nul-in-value", "eq-in-name", "empty-name"])
@pytest.mark.parametrize("allocator", [None, "glibc"])
def test_env_a_process_cannot_take_is_named_before_anything_runs(tmp_path, env, said,
                                                                  allocator):
    """Popen's own refusal named no variable ("embedded null byte", "illegal
    environment variable name"), and came once the command arm's group
    keeper had started.  A newline in a value is legal, and reaches the
    command as it is."""
    marker = tmp_path / "ran"
    with pytest.raises(ValueError) as e:
        run_command_arm(["sh", "-c", f"touch '{marker}'"], env=env, allocator=allocator,
                        timeout=20)
    assert str(e.value) == said
    assert not marker.exists()
    got = tmp_path / "foo"
    data = run_command_arm(["sh", "-c", f"printf %s \"$FOO\" > '{got}'"], env={"FOO": "a\nb c"},
                           allocator="glibc", timeout=20)
    assert data["error"] is None and got.read_text() == "a\nb c"


def test_a_command_that_cannot_be_started_says_why_in_its_error(tmp_path):
    """A command arm of a program that does not exist: "the command failed
    (exit 127)", the why in stderr_tail only."""
    prog = str(tmp_path / "no such prog")
    data = run_command_arm([prog], allocator="glibc", timeout=20)
    # (the arm's label is its command's first 80 characters: under xdist
    # tmp_path is long enough to cut "no such prog" in the label)
    assert data["error"] == (f"glibc: {prog[:80]}: cannot start "
                             f"{prog}: No such file or directory"), data
