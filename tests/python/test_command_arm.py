"""heaplab.harness.run_command_arm with an allocator (issue 17): any command on
heaplab (the preloaded library), glibc, mimalloc or jemalloc, its footprint
sampled from outside through the phases a script drives, recorded in the
harness's usual form."""
import os
import signal
import subprocess
import sys
import time

import pytest

import heaplab
from heaplab.harness import ALLOCATORS, ArmResult, allocator_env, run_command_arm, save_arm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("HEAPLAB_BUILD", os.path.join(ROOT, "build"))

MiB = 1 << 20

# A program that knows nothing of heaplab: it grows to 64 MiB of small
# blocks when told (SIGUSR1), frees them (SIGUSR2), and says so on stdout.
PROGRAM = r"""
import signal, sys, time
held = []
def grow(*_):
    held.extend(bytes(200) + str(i).encode() for i in range(300_000))
    print("grown", flush=True)
def drop(*_):
    held.clear()
    print("dropped", flush=True)
signal.signal(signal.SIGUSR1, grow)
signal.signal(signal.SIGUSR2, drop)
print("ready", flush=True)
while True:
    time.sleep(0.01)
"""


def _script(tmp_path):
    out = tmp_path / "out.txt"

    def wait_for(word, ctl):
        for _ in range(3000):
            if out.exists() and word in out.read_text():
                return
            assert ctl.alive(), "the program died"
            import time
            time.sleep(0.005)
        raise AssertionError(f"no {word!r}")

    def script(ctl):
        wait_for("ready", ctl)
        with ctl.phase("grow") as ph:
            os.kill(ctl.pid, signal.SIGUSR1)
            wait_for("grown", ctl)
            ph.note("what", "300,000 blocks")
        with ctl.phase("drop") as ph:
            ph.mark("drop")
            os.kill(ctl.pid, signal.SIGUSR2)
            wait_for("dropped", ctl)
            ctl.wait_low(3.0, settle_s=0.5)
        ctl.note("done", True)
    return script, out


def _cmd(out):
    # stdout to a file the script reads; the program is Debian's python3
    # with every object on malloc, so the allocator sees every block
    return ["/bin/sh", "-c", f'exec /usr/bin/python3 -u -c "$0" > {out}', PROGRAM]


@pytest.mark.parametrize("allocator", ["heaplab", "glibc"])
def test_phases_are_sampled_from_outside(tmp_path, allocator):
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("Debian's python3 is not installed")
    script, out = _script(tmp_path)
    data = run_command_arm(_cmd(out), {"PYTHONMALLOC": "malloc"}, allocator=allocator,
                           script=script, experiment="T", arm=allocator, interval_s=0.005,
                           timeout=120)
    assert data["error"] is None, data["error"]
    assert data["allocator"] == allocator and data["notes"] == {"done": True}
    arm = ArmResult(data)
    grow, drop = arm.phase("grow"), arm.phase("drop")
    assert grow["samples"] > 0 and drop["samples"] > 0
    assert grow.growth > 48 * MiB, grow
    # the peak is the highest of the phase's samples (its before and after among
    # them), never the lowest
    assert grow["phys_peak"] >= grow["phys_after"] and drop["phys_peak"] >= drop["phys_before"]
    assert drop["phys_peak"] - drop["phys_low"] > 0.8 * grow.growth or allocator == "glibc"
    assert grow["notes"]["what"] == "300,000 blocks"
    assert drop["phys_low_after_mark"] is not None and drop["notes"]["mark"] == "drop"
    assert data["series"] and all(len(s) == 4 for s in data["series"])
    if allocator == "heaplab":
        # heaplab gives the dropped blocks' pages back (glibc keeps most)
        assert drop.returned > 0.8 * grow.growth, (drop.returned, grow.growth)
    else:
        assert data["report"] is None
    folder = tmp_path / "results"
    save_arm(data, str(folder))
    assert (folder / "T" / f"{allocator}.json").exists()
    assert (folder / "T" / "records.csv").read_text().count("\n") == 3


def test_a_command_without_a_script_is_one_phase_with_its_report(tmp_path):
    data = run_command_arm(["/usr/bin/python3", "-c", "x = [str(i) for i in range(200000)]"],
                           {"PYTHONMALLOC": "malloc"}, allocator="heaplab",
                           options={"warm_pages": 0}, timeout=120, stop_signal=None)
    assert data["error"] is None and data["returncode"] == 0, data
    assert [r["phase"] for r in data["records"]] == ["run"]
    rep = data["report"]
    assert rep["launcher"] == "libheaplab-malloc.so" and rep["allocator"] == "heaplab"
    assert rep["options"]["warm_pages"] == 0 and rep["stats"]["manual_mallocs"] > 200000


def test_peers_are_preloaded():
    for name in ("mimalloc", "jemalloc"):
        env = allocator_env(name)
        assert os.path.exists(env["LD_PRELOAD"]) and name[:2] in os.path.basename(env["LD_PRELOAD"])
    assert allocator_env("glibc")["HEAPLAB_ALLOCATOR"] == "libc"
    assert allocator_env("heaplab", {"page_release": False})["HEAPLAB_PAGE_RELEASE"] == "false"
    assert set(ALLOCATORS) == {"heaplab", "glibc", "mimalloc", "jemalloc"}


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="allocator 'tcmalloc'"):
        run_command_arm(["true"], allocator="tcmalloc")
    with pytest.raises(ValueError, match="not a heaplab option"):
        run_command_arm(["true"], allocator="heaplab", options={"page_releas": True})
    with pytest.raises(ValueError, match="apply to allocator='heaplab' only"):
        run_command_arm(["true"], allocator="jemalloc", options={"page_release": True})
    # the preloaded heap is manual: it ignores the collector's options given
    # as variables -- an arm asking for one measured the heap without it
    for name, value in [("compact", "always"), ("generational", True),
                        ("collector", "background"), ("gc_trigger_bytes", 65536),
                        # every collected-only option, from the core's table: these
                        # were accepted and measured nothing (the review of session 33)
                        ("young_bytes", "1m"), ("young_min_bytes", "64m"),
                        ("pacing_max_wait_ms", 5), ("tenure_full_marks", 0)]:
        with pytest.raises(ValueError, match=f"option '{name}': the preloaded heap is a manual"):
            run_command_arm(["true"], allocator="heaplab", options={name: value})
    from heaplab.harness import PRELOAD_IGNORED_OPTIONS
    assert set(PRELOAD_IGNORED_OPTIONS) == \
        {k for k, v in heaplab.options().items() if v["collected_only"]}
    assert allocator_env("heaplab", {"heap_limit_bytes": "1g"})["HEAPLAB_HEAP_LIMIT_BYTES"] == "1g"


@pytest.mark.parametrize("options, needle", [
    ({"warm_pages": "abc"}, "option warm_pages: 'abc' is not a whole number"),
    ({"warm_pages": 2.5}, "option warm_pages: '2.5' is not a whole number"),
    ({"page_size": "3k"}, "option page_size: '3k' is out of range"),
    ({"page_release": "maybe"}, "option page_release: 'maybe' is not a boolean"),
])
def test_bad_option_values_are_named_before_anything_runs(tmp_path, options, needle):
    """allocator_env checked the options' names only and passed their values
    on as HEAPLAB_<NAME>=str(value): the preloaded library refused a bad
    one and fell back to the system allocator (as it does for any program),
    and the arm -- error None, allocator 'heaplab' -- measured glibc."""
    marker = tmp_path / "ran"
    with pytest.raises(ValueError, match=needle):
        run_command_arm(["sh", "-c", f"touch {marker}"], allocator="heaplab", options=options)
    assert not marker.exists()


def test_an_arm_that_ran_on_the_system_allocator_is_an_error():
    """Options whose every value is good may still be refused together
    (small_max above a quarter of page_size), and env may carry a bad
    HEAPLAB_*: the library falls back to glibc, and the arm said nothing --
    its report's allocator was 'libc'.  (compact=always was the example: a
    manual heap ignores the collector's switches the environment gives now,
    a818f6c.)"""
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("Debian's python3 is not installed")
    prog = ["/usr/bin/python3", "-c", "x = [bytes(100) for i in range(20000)]"]
    data = run_command_arm(prog, allocator="heaplab", options={"page_size": "16k", "small_max": "8k"},
                           stop_signal=None, timeout=120)
    assert data["report"]["allocator"] == "libc", data["report"]
    assert "asked for allocator heaplab, the command ran on the system allocator" in \
        data["error"] and "option small_max: 8192 exceeds page_size/4" in data["error"], \
        data["error"]
    data = run_command_arm(prog, {"HEAPLAB_WARM_PAGES": "zz"}, allocator="heaplab",
                           stop_signal=None, timeout=120)
    assert "the command ran on the system allocator" in data["error"] and \
        "HEAPLAB_WARM_PAGES=zz" in data["error"], data["error"]
    data = run_command_arm(prog, allocator="heaplab", options={"warm_pages": 3},
                           stop_signal=None, timeout=120)
    assert data["error"] is None and data["report"]["allocator"] == "heaplab", data["error"]


def test_preload_path_and_cli(monkeypatch, tmp_path):
    path = heaplab.preload_path()
    assert os.path.isfile(path) and path.endswith("libheaplab-malloc.so")
    out = subprocess.run([sys.executable, "-m", "heaplab", "preload"], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == path
    monkeypatch.setenv("HEAPLAB_PRELOAD", str(tmp_path / "nothing.so"))
    with pytest.raises(heaplab.Error, match="HEAPLAB_PRELOAD=.*no such file"):
        heaplab.preload_path()
    p = subprocess.run([sys.executable, "-m", "heaplab", "preload"], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "no such file" in p.stderr


def test_a_command_that_never_ran_on_heaplab_is_an_error(monkeypatch, tmp_path):
    """run_command_arm(..., allocator="heaplab") recorded a command that never
    ran on heaplab as a clean heaplab arm (error None, report None): a
    preload path holding a space or a colon (ld.so splits LD_PRELOAD there),
    HEAPLAB_PRELOAD naming a file that is no shared object, or one ld.so
    refuses, and a statically linked program (docs/harness.md: such an arm
    gets an error).  (Session 26.)"""
    import shutil
    lib = heaplab.preload_path()
    prog = [sys.executable, "-c", "x = [str(i) for i in range(20000)]"]
    # a path LD_PRELOAD cannot name: refused before anything runs
    for folder in ("with space", "with:colon"):
        (tmp_path / folder).mkdir()
        shutil.copy(lib, tmp_path / folder / "libheaplab-malloc.so")
        monkeypatch.setenv("HEAPLAB_PRELOAD", str(tmp_path / folder / "libheaplab-malloc.so"))
        with pytest.raises(heaplab.InvalidArgument, match="holds a space or a colon"):
            run_command_arm(prog, allocator="heaplab", stop_signal=None, timeout=60)
    # not a shared object: refused by preload_path()
    (tmp_path / "text.so").write_text("not a library\n")
    monkeypatch.setenv("HEAPLAB_PRELOAD", str(tmp_path / "text.so"))
    with pytest.raises(heaplab.Error, match="not a shared object"):
        heaplab.preload_path()
    with pytest.raises(heaplab.Error, match="not a shared object"):
        run_command_arm(prog, allocator="heaplab", stop_signal=None, timeout=60)
    # a PIE executable is ET_DYN too, and ld.so refuses it: refused by
    # preload_path() (it was taken: the review, session 26)
    pie = shutil.which("true")
    elf = heaplab._elf_header(pie)
    is_dyn = elf is not None and elf[0] == 3 and elf[1] is not None
    if is_dyn:
        monkeypatch.setenv("HEAPLAB_PRELOAD", pie)
        with pytest.raises(heaplab.Error, match="not a shared object"):
            heaplab.preload_path()
    # a shared object ld.so refuses anyway (its line on stderr, no report): recorded
    from heaplab.harness import _check_ran_on_heaplab
    data = {"error": None, "report": None}
    _check_ran_on_heaplab(data, "ERROR: ld.so: object '/x/lib.so' from LD_PRELOAD cannot be "
                                "preloaded (wrong ELF class: ELFCLASS32): ignored.\n", "arm")
    assert data["error"] is not None and "never ran on it" in data["error"] and \
        "cannot be preloaded" in data["error"], data["error"]
    monkeypatch.delenv("HEAPLAB_PRELOAD")
    # a statically linked program: LD_PRELOAD does not reach it
    from heaplab.harness import _statically_linked
    static = [p for p in ("/sbin/ldconfig", "/usr/sbin/ldconfig")
              if os.path.exists(p) and _statically_linked([p], os.environ, None)]
    assert _statically_linked(prog, os.environ, None) is None
    # the dynamic loader has no interpreter either, and LD_PRELOAD reaches what
    # it runs: not "statically linked" (the review, session 26)
    loader = heaplab._elf_header(sys.executable)[1]
    assert loader and _statically_linked([loader, "/bin/sh"], os.environ, None) is None
    data = run_command_arm([loader, "/bin/sh", "-c", "true"], allocator="heaplab",
                           stop_signal=None, timeout=60)
    assert data["error"] is None, data["error"]
    if static:
        data = run_command_arm([static[0], "-p"], allocator="heaplab", stop_signal=None,
                               timeout=60)
        assert data["error"] is not None and "is statically linked" in data["error"], \
            data["error"]
    if not is_dyn or not static:
        pytest.skip("no PIE `true` or no static ldconfig here: partly checked")


def test_a_command_arms_note_must_be_json(tmp_path):
    """CommandPhase.note and CommandControl.note took any value (Phase.note
    refuses what the arm's JSON cannot hold, naming the note): a set noted
    by a script was found only when the arm was saved."""
    seen = []

    def script(ctl):
        with ctl.phase("p") as ph:
            for target in (ph, ctl):
                try:
                    target.note("odd", {1, 2})
                except TypeError as e:
                    seen.append(str(e))
            ph.note("fine", [1, 2])

    data = run_command_arm(["/bin/sleep", "30"], script=script, allocator="glibc", timeout=60)
    assert len(seen) == 2 and all("note 'odd'" in s and "JSON" in s for s in seen), seen
    assert data["records"][0]["notes"]["fine"] == [1, 2], data
    save_arm(data, str(tmp_path))


@pytest.mark.parametrize("event", ["mark", "reset"])
def test_outside_sampler_windows_skip_readings_begun_before(monkeypatch, event):
    """The command sampler's "after the mark" window (and a reset's phase)
    counts only readings begun after the event: the thread's reading begun
    before the mark and stored after it was the lowest after the mark (the
    core's sampler had the same fault, tests/c/sampler_windows_skip_reads_
    begun_before.c).  The sampler thread's real reading of this process is
    held, finished, while the process grows by 64 MiB and the event is
    called; nothing is freed after it."""
    import threading

    from heaplab import harness
    real = harness._read_rollup
    main = threading.get_ident()
    gate, inside, go = threading.Event(), threading.Event(), threading.Event()
    thread_reads = [0]

    def held_read(pid):
        fp = real(pid)
        if threading.get_ident() != main:
            if gate.is_set():
                gate.clear()
                inside.set()
                assert go.wait(20)
            thread_reads[0] += 1
        return fp

    def wait_reads(n):
        for _ in range(20000):
            if thread_reads[0] >= n:
                return
            time.sleep(0.001)
        raise AssertionError("the sampler's thread took no reading in 20 s")

    import time
    monkeypatch.setattr(harness, "_read_rollup", held_read)
    s = harness._OutsideSampler(os.getpid(), 0.001)
    try:
        wait_reads(2)
        gate.set()
        assert inside.wait(20), "the sampler's thread never read"
        grown = bytearray(64 * MiB)
        for i in range(0, len(grown), 4096):
            grown[i] = 1
        getattr(s, event)()
        s.sample()
        at = s.summary()
        floor = at["min_after_mark"] if event == "mark" else at["min_phys"]
        n = thread_reads[0]
        go.set()
        wait_reads(n + 2)
        after = s.summary()
        low = after["min_after_mark"] if event == "mark" else after["min_phys"]
        assert low + 8 * MiB >= floor, (
            f"{event}: lowest after it {low / MiB:.1f} MiB, {(floor - low) / MiB:.1f} MiB below "
            "its own reading with nothing freed: a reading begun before it counted")
        del grown
    finally:
        go.set()
        s.stop()


def test_the_outside_sampler_counts_swap_as_charged(monkeypatch):
    """A command's footprint is its anonymous memory and its swap, as the
    core's phys_footprint: pages the kernel swapped out are charged still,
    not given back (the mutation audit of session 37).  The rollup read
    here says 4 MiB anonymous and 6 MiB swapped."""
    from heaplab import harness
    monkeypatch.setattr(harness, "_read_rollup", lambda pid: (5 * MiB, 4 * MiB, 0, 6 * MiB))
    s = harness._OutsideSampler(os.getpid(), 3600)
    try:
        s.mark()
        assert s.sample() is not None
        summ = s.summary()
    finally:
        s.stop()
    assert summ["max_phys"] == summ["min_phys"] == summ["min_after_mark"] == 10 * MiB, summ


def test_a_report_that_is_not_json_is_the_arms_error():
    """A HEAPLAB_STATS report that is there but not JSON -- cut short, or
    written with a locale's decimal comma ("elapsed_s": 0,002136: the
    environment hunt, session 27) -- was dropped without a word: report
    None, error None.  The command writes the bad report itself and leaves
    by the exit_group system call, so the library's own report does not
    replace it (os._exit did, until the library had an _exit of its own)."""
    if os.uname().machine != "x86_64":
        pytest.skip("SYS_exit_group is 231 on x86-64 only")
    prog = ("import os, ctypes; open(os.environ['HEAPLAB_STATS'], 'w').write("
            "'{\"pid\": 1, \"elapsed_s\": 0,002136}'); ctypes.CDLL(None).syscall(231, 0)")
    data = run_command_arm(["/usr/bin/python3", "-c", prog], allocator="heaplab", timeout=60,
                           stop_signal=None)
    assert data["report"] is None, data["report"]
    err = data["error"] or ""
    assert "HEAPLAB_STATS report" in err and "stats.json" in err and "is not JSON" in err and \
        "0,002136" in err, err


def test_an_unreadable_footprint_is_the_arms_error(monkeypatch):
    """A command whose /proc/PID/smaps_rollup cannot be read -- one that made
    itself non-dumpable (prctl(PR_SET_DUMPABLE, 0)), read by another user:
    EACCES -- was taken for "gone": phases of 0 bytes, samples 0, status ok,
    error None (the environment hunt, session 27).  The EACCES is made here
    (as root the real one cannot be had): the arm's error names the file
    and the errno, and the phase's figures are None, not 0."""
    from heaplab import harness

    def unreadable(pid):
        raise PermissionError(13, "Permission denied", f"/proc/{pid}/smaps_rollup")
    monkeypatch.setattr(harness, "_read_rollup", unreadable)

    def script(ctl):
        with ctl.phase("hold"):
            pass
    data = run_command_arm(["sleep", "30"], allocator="glibc", script=script, timeout=60)
    err = data["error"] or ""
    assert "smaps_rollup" in err and "Permission denied" in err and "Errno 13" in err, err
    rec = data["records"][0]
    for k in ("phys_before", "phys_after", "phys_peak", "phys_low", "rss_peak", "rss_before"):
        assert rec[k] is None, (k, rec)


def test_a_proc_of_another_pid_namespace_is_the_arms_error():
    """In a pid namespace without its own /proc (unshare --pid --fork), the
    command's pid named another process of the host's /proc (pid 2: the
    host's kthreadd, an empty rollup read as "gone"): phases of 0 bytes,
    error None.  The arm's error now says /proc is another namespace's.
    And the arm waited 10 s for the command's exec (the wait for
    /proc/PID/cmdline to leave the wrapper's read kthreadd's empty one as an
    exec under way): it does not wait where /proc is another's."""
    import shutil
    import json
    if os.geteuid() != 0 or not shutil.which("unshare"):
        pytest.skip("needs root and unshare(1) for a pid namespace")
    prog = ("import json; from heaplab.harness import run_command_arm\n"
            "def script(ctl):\n"
            "    with ctl.phase('hold'): pass\n"
            "import time; t0 = time.monotonic()\n"
            "d = run_command_arm(['sleep', '30'], allocator='glibc', script=script, timeout=60)\n"
            "print(json.dumps({'error': d['error'], 'rec': d['records'][0],\n"
            "                  'seconds': time.monotonic() - t0}))\n")
    p = subprocess.run(["unshare", "--pid", "--fork", sys.executable, "-c", prog],
                       capture_output=True, text=True, timeout=120)
    if p.returncode != 0 and "unshare failed" in p.stderr:
        pytest.skip(f"no pid namespace here: {p.stderr.strip()}")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout.splitlines()[-1])
    assert "another pid namespace's" in (out["error"] or ""), out
    assert out["rec"]["phys_peak"] is None and out["rec"]["phys_before"] is None, out
    # (the old wait: 10 s; the arm's own work, the sleep stopped at once: ~0.1 s)
    assert out["seconds"] < 5, f"the arm took {out['seconds']:.1f} s: it waited for an exec"


def test_a_temporary_folder_with_a_percent_p_keeps_the_report(tmp_path, monkeypatch):
    """The preloaded library reads %p in HEAPLAB_STATS as the pid: under a
    TMPDIR holding "%p" the harness's own temporary path was rewritten and
    the report written elsewhere -- report None, error None (the environment
    hunt, session 27).  Doubling the harness's '%' (the library reads %% as
    %) then sent a launcher's report, which takes the path as it is,
    elsewhere instead (the review): such a TMPDIR is passed over."""
    import tempfile
    odd = tmp_path / "a%pb%%c"
    odd.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(odd))
    lua = os.path.join(BUILD, "clients", "heaplab-lua")
    for cmd in (["/usr/bin/python3", "-c", "x = [str(i) for i in range(20000)]"],
                [lua, "-e", "local t = {} for i = 1, 1000 do t[i] = tostring(i) end"]):
        data = run_command_arm(cmd, allocator="heaplab", timeout=60, stop_signal=None)
        assert data["error"] is None, (cmd, data["error"])
        assert data["report"] is not None and data["report"]["allocator"] == "heaplab", data
        assert "cannot write the report" not in data["stderr_tail"], data["stderr_tail"]
    assert sorted(os.listdir(tmp_path)) == ["a%pb%%c"], os.listdir(tmp_path)
    assert os.listdir(odd) == [], os.listdir(odd)


def test_the_exec_wrapper_is_neither_preloaded_nor_sampled():
    """Every command goes through the PR_SET_PDEATHSIG exec wrapper (a short
    Python step, same pid).  That step ran under the command's LD_PRELOAD,
    and the outside sampler started before the exec: a `sleep` on jemalloc
    showed a footprint peak of 4.4 MiB (CPython's start-up on jemalloc)
    where sleep's own is ~0.4 MiB.  The wrapper runs without the preload
    and puts it back for the exec; the sampler starts after the exec."""
    data = run_command_arm(["sh", "-c", 'echo "$LD_PRELOAD"; sleep 0.3'], allocator="jemalloc",
                           timeout=60, stop_signal=None)
    assert data["error"] is None and data["returncode"] == 0, data
    out = data.get("stdout_tail") or data.get("stdout") or ""
    assert "libjemalloc" in out, f"the command lost its LD_PRELOAD: {out!r}"
    peak = data["records"][0]["phys_peak"]
    assert peak < 2 * MiB, f"footprint peak {peak / MiB:.1f} MiB: the wrapper's Python was sampled"


# holds 24 MiB (written: charged) until it exits after 0.4 s (os._exit: no
# teardown that frees it first)
HOLDS_24_MIB = ["/usr/bin/python3", "-c",
                "import os, time; b = b'x' * (24 << 20); time.sleep(0.4); os._exit(0)"]


@pytest.mark.parametrize("allocator", ["heaplab", "glibc"])
def test_after_figures_of_a_command_that_has_exited_are_its_last_sample(allocator):
    """The one phase `run` of the form without a script ends after the
    command has exited: its phys_after and rss_after read 0 -- "everything
    given back" -- where the command held 24 MiB to its end (the harness
    hunt, session 29: phys_after 0 < phys_low, analysis's phys_growth off by
    the command's whole start-up).  "After" is the phase's last sample,
    taken before the command exited; notes' after_s says when."""
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("Debian's python3 is not installed")
    data = run_command_arm(HOLDS_24_MIB, allocator=allocator, timeout=60, stop_signal=None)
    assert data["error"] is None and data["returncode"] == 0, data["error"]
    (r,) = data["records"]
    assert r["samples"] >= 10, r
    assert r["phys_after"] is not None and r["phys_after"] >= 24 * MiB, r
    assert r["phys_low"] <= r["phys_after"] <= r["phys_peak"], r
    assert r["rss_after"] >= r["phys_after"] - r["lazyfree_after"], r
    assert r["anonymous_after"] is not None and r["lazyfree_after"] is not None, r
    assert r["t_start_s"] <= r["notes"]["after_s"] <= r["t_end_s"], (r["notes"], r)
    # the series' last reading in the phase is the one "after" took
    last = [x for x in data["series"] if x[0] <= r["notes"]["after_s"]][-1]
    assert last[1] == r["phys_after"], (last, r["phys_after"])


def test_a_phase_after_the_command_exited_has_no_figures():
    """A scripted phase begun after the command exited had phys_before 0
    and phys_after 0 (`sample() or (0, 0, 0, 0)`): null, never 0, as for a
    footprint that could not be read.  The phase in which it exited ends
    with its last sample."""
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("Debian's python3 is not installed")
    import time

    def script(ctl):
        with ctl.phase("exits"):
            while ctl.alive():
                time.sleep(0.01)
        with ctl.phase("gone"):
            pass

    data = run_command_arm(HOLDS_24_MIB, allocator="glibc", script=script, timeout=60,
                           stop_signal=None)
    assert data["error"] is None and data["returncode"] == 0, data["error"]
    exits, gone = data["records"]
    assert exits["phys_before"] is not None and exits["phys_after"] >= 24 * MiB, exits
    assert "after_s" in exits["notes"], exits
    for k in ("phys_before", "rss_before", "lazyfree_before", "anonymous_before",
              "phys_after", "rss_after", "lazyfree_after", "anonymous_after"):
        assert gone[k] is None, (k, gone)
    assert gone["samples"] == 0 and "after_s" not in gone["notes"], gone


def test_a_report_written_under_the_commands_pid_is_read():
    """A command that takes itself for a descendant of a process writing the
    same path writes <path>.<its pid>: the arm's report was None, silently
    (a preloaded parent that merely mapped the library made every command
    do so: the harness hunt, session 29).  Here the mark of a launcher
    (HEAPLAB_STATS_OWNER of another pid, the same path) makes it so."""
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("Debian's python3 is not installed")
    cmd = ["/bin/sh", "-c", 'HEAPLAB_STATS_OWNER="1:$HEAPLAB_STATS" exec /usr/bin/python3 -c '
           '"x = [str(i) for i in range(20000)]"']
    data = run_command_arm(cmd, {"PYTHONMALLOC": "malloc"}, allocator="heaplab", timeout=60,
                           stop_signal=None)
    assert data["error"] is None, data["error"]
    assert data["report"] is not None and data["report"]["pid"] == data["pid"], data["report"]
    assert data["report"]["stats"]["manual_mallocs"] > 20000, data["report"]["stats"]
    assert any(f"stats.json.{data['pid']}" in w for w in data["warnings"]), data["warnings"]


def test_a_loaded_library_that_wrote_no_report_is_said():
    """The library loaded, no report anywhere: a command that ended by the
    exit_group system call itself -- not an error (docs/harness.md), but said
    in the arm's warnings, with the reports its children wrote (the command
    is a wrapper).  (dash's `sh -c`, which ends with _exit(), was this test's
    command: the library writes its report since it has an _exit of its
    own.)"""
    if not os.path.exists("/usr/bin/python3") or os.uname().machine != "x86_64":
        pytest.skip("Debian's python3 on x86-64 (SYS_exit_group is 231 there)")
    data = run_command_arm(["/usr/bin/python3", "-c",
                            "import ctypes, subprocess, time; time.sleep(0.2); "
                            "subprocess.run(['/bin/true']); subprocess.run(['/bin/true']); "
                            "ctypes.CDLL(None).syscall(231, 0)"],  # (SYS_exit_group, x86-64)
                           allocator="heaplab", timeout=60, stop_signal=None)
    assert data["error"] is None and data["report"] is None, data["error"]
    (w,) = [w for w in data["warnings"] if "wrote no HEAPLAB_STATS report" in w]
    assert "exit_group" in w and "its descendants wrote 2 report(s)" in w, w


def test_a_shell_that_ends_with_exit_writes_its_report():
    """dash (/bin/sh) ends with _exit(): the library wrote no report for it
    and the arm's report was None; now the shell's own report is the arm's."""
    data = run_command_arm(["/bin/sh", "-c", "sleep 0.2; /bin/true"], allocator="heaplab",
                           timeout=60, stop_signal=None)
    assert data["error"] is None and data["report"] is not None, data["error"]
    assert data["report"]["pid"] == data["pid"], data["report"]
    assert not [w for w in data["warnings"] if "wrote no HEAPLAB_STATS report" in w]


def test_a_preloaded_harness_gets_its_commands_report(tmp_path):
    """The harness itself run under the preloaded library (LD_PRELOAD=... 
    PYTHONMALLOC=malloc python script.py), without HEAPLAB_STATS: each
    command's report went to stats.json.<pid> -- the preload took any
    preloaded parent for one writing the same path -- and the arm's report
    was None with no error (the harness hunt, session 29)."""
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("Debian's python3 is not installed")
    prog = ("import json; from heaplab.harness import run_command_arm; "
            "d = run_command_arm(['/usr/bin/python3', '-c', 'x = [str(i) for i in range(9999)]'], "
            "{'PYTHONMALLOC': 'malloc'}, allocator='heaplab', timeout=60, stop_signal=None); "
            "print(json.dumps([d['error'], d['report'] is not None and d['report']['pid'] == "
            "d['pid'], d.get('warnings')]))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HEAPLAB_")}
    env.update(LD_PRELOAD=heaplab.preload_path(), PYTHONMALLOC="malloc")
    p = subprocess.run([sys.executable, "-c", prog], env=env, capture_output=True, text=True,
                       timeout=120, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-2000:]
    import json
    error, has_report, warnings = json.loads(p.stdout.splitlines()[-1])
    # every warning but the one a loaded machine may rightly give: this
    # command runs 11 ms when it has a CPU to itself (its report's
    # elapsed_s), and the sampler's thread took 15-30 ms to start beside 2
    # busy loops -- "phase 'run': 0 sample(s)" failed this test in 6 of 209
    # runs there (18 of 564 before the run phase counted the samples from
    # time 0; session 31).  That warning is right, and is
    # test_a_command_too_short_to_sample_is_said's.  The report's own
    # ("wrote its report as ...", "wrote no HEAPLAB_STATS report") stay.
    warnings = [w for w in warnings if "before 2 samples were taken" not in w]
    assert error is None and has_report and not warnings, (error, has_report, warnings)


def test_the_run_phase_counts_the_samples_taken_before_it_began(monkeypatch):
    """Without a script the whole run is the one phase "run": the samples
    the sampler's thread took between the arm's time 0 and the phase's start
    are the command's.  The phase reset the sampler as it began and dropped
    them: on a loaded machine, where that thread took 40 ms to start, a
    0.1 s command ended with 0 or 1 samples in its phase and a warning
    (session 31).  Here the gap is made certain: the harness's start
    announcement (between the two) waits until the command has ended."""
    import heaplab.harness as harness
    real = harness._announce

    def slow_start(what, *a, **k):
        if what == "start":
            time.sleep(1.0)
        return real(what, *a, **k)

    monkeypatch.setattr(harness, "_announce", slow_start)
    data = run_command_arm(["/bin/sleep", "0.4"], allocator="glibc", timeout=60,
                           stop_signal=None)
    assert data["error"] is None, data["error"]
    (run,) = data["records"]
    assert run["samples"] >= 2 and run["phys_peak"] is not None, run
    assert run["t_start_s"] == 0 and run["duration_s"] >= 0.4, run
    assert not data["warnings"], data["warnings"]


@pytest.mark.parametrize("allocator", ["heaplab", "glibc"])
def test_a_command_too_short_to_sample_is_said(allocator):
    """/bin/true: one sample at its exec or none, and a record of zeros or
    of that one reading with no word (the harness hunt, session 29).  Fewer
    than 2 samples is an arm warning; no sample, no peak (null, never 0);
    the report's own peak (VmHWM) is kept beside the sampled one."""
    import time

    def script(ctl):
        with ctl.phase("run"):
            while ctl.alive():
                time.sleep(0.001)
        with ctl.phase("gone"):
            pass

    data = run_command_arm(["/bin/true"], allocator=allocator, script=script, timeout=60,
                           stop_signal=None)
    assert data["error"] is None, data["error"]
    run, gone = data["records"]
    # "gone" starts after the command's end: no sample, ever.  "run" has one
    # or none as a rule, but a loaded machine can stretch /bin/true's exec
    # (under LD_PRELOAD too) over two sampling intervals: a run phase with
    # 2 samples is no defect, and is judged by the rule below like any other
    # (it failed a helper's run at load 10, session 31)
    assert gone["samples"] == 0, data["records"]
    for r in data["records"]:
        if r["samples"] >= 2:
            continue
        if r["samples"] == 0:
            assert r["phys_peak"] is None and r["rss_peak"] is None and r["phys_low"] is None, r
        said = [w for w in data["warnings"] if f"phase {r['phase']!r}: {r['samples']} sample" in w]
        assert said and "before 2 samples were taken" in said[0], data["warnings"]
    if allocator == "heaplab":
        assert data["report_peak_rss"] == data["report"]["peak_rss"] > 0, data["report"]
    else:
        assert data["report_peak_rss"] is None


def test_a_command_arms_series_starts_at_0_and_is_in_time_order():
    """The series had negative times (the arm's t0 was taken after the
    sampler's thread started) and was out of order (readings appended as
    they complete, stamped when they began: a phase's own reading and the
    thread's interleave) -- the harness hunt, session 29."""
    import time

    def script(ctl):
        for i in range(20):
            with ctl.phase(f"p{i}"):
                time.sleep(0.002)

    data = run_command_arm(["sleep", "2"], allocator="glibc", script=script, timeout=60,
                           interval_s=0.001)
    assert data["error"] is None, data["error"]
    times = [x[0] for x in data["series"]]
    assert len(times) > 20 and times[0] >= 0, times[:5]
    assert times == sorted(times), [(a, b) for a, b in zip(times, times[1:]) if b < a][:5]
