"""bench.py's command line (experiments/bench/bench.py): what it cannot run
is named in one line (exit 2 for what the command line asked), and `pair`
leaves no benchmark running -- when B cannot start, or on Ctrl-C (session
20's hunt: FileNotFoundError/ValueError/AttributeError/IndexError
tracebacks, A left running, --rounds 0 ran 4 rounds and -1 none)."""
import os
import signal
import subprocess
import sys

from procs import gone, reap, wait_for_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "experiments", "bench", "bench.py")

SLEEPER = """
import sys, time
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write(str(__import__("os").getpid()))
__import__("os").replace(sys.argv[1] + ".tmp", sys.argv[1])
time.sleep(120)
"""


def bench(*args, env=None):
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True,
                          timeout=120, env=None if env is None else dict(os.environ, **env))


def sleeper(tmp_path, name):
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    return f"{sys.executable} {script} {tmp_path / name}"


def test_usage_errors_are_one_line_exit_2(tmp_path):
    cases = [
        (["run", "--exe", "heaplab"], "--exe 'heaplab': expected ALLOCATOR=PATH"),
        (["run", "--exe", "heaplab=/nonexistent"], "/nonexistent is not an executable"),
        (["pair", "true", "true", "--rounds", "0"], "--rounds 0: at least 1"),
        (["pair", "true", "true", "--rounds", "-1"], "--rounds -1: at least 1"),
        # an option between the mode and the commands (docs/performance.md has
        # `bench.py --rounds 8 pair` and `pair "A" "B" --rounds N`): it was
        # "unrecognized arguments: true true"
        (["pair", "--rounds", "0", "true", "true"], "--rounds 0: at least 1"),
        (["compare", "--rounds", "1", "/nonexistent/bench-x fill", "true"],
         "cannot start '/nonexistent/bench-x'"),
        # options of run (and check) taken by the other modes, then ignored:
        # `check --results DIR` wrote nothing, exit 0
        (["check", "--results", str(tmp_path / "r")], "--results: run only (check runs the "
                                                      "tiny suite and writes no record)"),
        (["pair", "true", "true", "--results", str(tmp_path / "r")],
         "--results: run only (pair runs the commands given, as given)"),
        (["compare", "true", "true", "--quick"], "--quick: run only"),
        (["phases", "true", "--workload", "fill"], "--workload: run only"),
        (["pair", "true", "true", "--exe", "heaplab=/bin/true"], "--exe: run and check only"),
        (["check", "--workload", "fill"], "--workload: run only"),
        (["compare", "", "true"], "an empty command"),
        # run took --rounds 1, then ran HEAPLAB_BENCH_RUNS's runs (the bench hunt, session 27)
        (["run", "--rounds", "1", "--workload", "release"], "--rounds: pair, phases and compare only"),
        (["run", "--rounds", "0"], "--rounds: pair, phases and compare only"),
        (["compare", "/nonexistent/bench-x fill", "true", "--rounds", "1"],
         "cannot start '/nonexistent/bench-x'"),
    ]
    for args, needle in cases:
        p = bench(*args)
        assert p.returncode == 2 and needle in p.stderr, (args, p.returncode, p.stderr)
        assert "Traceback" not in p.stderr, p.stderr
        assert "round 1" not in p.stdout and " s  B " not in p.stdout, (args, p.stdout)
    # an unknown workload is refused before --results is made (the review, session 27)
    made = tmp_path / "made" / "here"
    p = bench("run", "--workload", "nosuch", "--results", str(made))
    assert p.returncode == 2 and "no workload nosuch" in p.stderr, p.stderr
    assert not (tmp_path / "made").exists(), "--results was made for a refused run"
    # --results that cannot be written: found after the whole run, as a traceback,
    # the records lost (the bench hunt, session 27); now before anything runs
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    for folder in ("/dev/null/x", str(ro)):
        p = bench("run", "--workload", "release", "--results", folder,
                  "--build", str(tmp_path / "nobuild"))
        if folder == str(ro) and p.returncode == 1 and os.access(ro, os.W_OK):
            continue    # (root writes into a 0555 folder)
        assert p.returncode == 2 and f"--results {folder}: cannot write there" in p.stderr, \
            (folder, p.stderr)
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    # a build folder that is not there: it blamed the peers' packages,
    # installed, and named no folder (the installation hunt, session 26)
    p = bench("run", "--build", str(tmp_path / "nobuild"))
    assert p.returncode == 1 and f"{tmp_path / 'nobuild'}/experiments/bench is not there" in \
        p.stderr and "libgc-dev" not in p.stderr, p.stderr


def test_a_record_that_is_not_an_object_is_named():
    p = bench("compare", "echo 5", "echo 6", "--rounds", "1")
    assert p.returncode == 1 and "echo 5: exit 0, printed int JSON" in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_pair_kills_a_when_b_cannot_start(tmp_path):
    p = subprocess.Popen([sys.executable, BENCH, "pair", sleeper(tmp_path, "a.pid"),
                          "/nonexistent/bench-b fill", "--rounds", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = p.communicate(timeout=120)
    pid = int(open(tmp_path / "a.pid").read()) if os.path.exists(tmp_path / "a.pid") else None
    try:
        assert p.returncode == 2 and "cannot start '/nonexistent/bench-b'" in err, err
        assert "Traceback" not in err
        # A may not have written its pid before it was killed: then it is gone too
        assert pid is None or gone(pid), f"A ({pid}) still runs after bench.py exited"
    finally:
        reap(p, pid)


def test_ctrl_c_to_pair_stops_both_benchmarks(tmp_path):
    def sigint_default():
        signal.signal(signal.SIGINT, signal.SIG_DFL)   # as in a terminal
    p = subprocess.Popen([sys.executable, BENCH, "pair", sleeper(tmp_path, "a.pid"),
                          sleeper(tmp_path, "b.pid"), "--rounds", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=sigint_default)
    pids = [None, None]
    try:
        pids = [int(wait_for_file(str(tmp_path / n), p)) for n in ("a.pid", "b.pid")]
        p.send_signal(signal.SIGINT)                  # to bench.py only, not its group
        out, err = p.communicate(timeout=60)
        assert p.returncode == 130 and "interrupted" in err, (p.returncode, err)
        assert "Traceback" not in err
        left = [x for x in pids if not gone(x)]
        assert not left, f"benchmarks {left} still run after bench.py exited"
    finally:
        reap(p, *pids)


def test_bench_runs_and_depth_are_checked_before_anything_runs(tmp_path):
    # HEAPLAB_BENCH_RUNS=0 or -2 ran the other workloads, then a StatisticsError
    # traceback (nothing saved); =abc broke even --help (the bench hunt, session 27)
    for name, value in [("HEAPLAB_BENCH_RUNS", "0"), ("HEAPLAB_BENCH_RUNS", "-2"),
                        ("HEAPLAB_BENCH_RUNS", "abc"), ("HEAPLAB_BENCH_DEPTH", "31")]:
        p = bench("run", "--workload", "release", "--build", str(tmp_path / "nobuild"),
                  env={name: value})
        assert p.returncode == 2 and f"{name}={value!r}: expected a whole number" in p.stderr, \
            (name, value, p.returncode, p.stderr)
        assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    p = bench("--help", env={"HEAPLAB_BENCH_RUNS": "abc"})
    assert p.returncode == 0 and "release" in p.stdout, p.stderr


def test_a_run_that_failed_or_printed_no_record_says_what_happened(tmp_path):
    # an arm killed by a signal after printing its record: "None (exit -11)"; a JSON
    # object without time_ns: a KeyError traceback (the bench hunt, session 27)
    record = ('{"allocator": "x", "workload": "fill", "time_ns": 5, "checksum": "0x1", '
              '"error": null}')
    crash = tmp_path / "crash.sh"
    crash.write_text(f"#!/bin/sh\necho '{record}'\nkill -SEGV $$\n")
    crash.chmod(0o755)
    p = bench("compare", f"echo '{record}'", str(crash), "--rounds", "1")
    assert p.returncode == 1 and "its record has no error, but killed by SIGSEGV (signal 11)" \
        in p.stderr and "None" not in p.stderr, p.stderr
    p = bench("compare", "echo {}", "echo {}", "--rounds", "1")
    assert p.returncode == 1 and "echo {}: exit 0, printed a JSON object with no 'time_ns'" \
        in p.stderr, p.stderr
    assert "Traceback" not in p.stderr


def test_pair_compare_phases_refuse_results_that_differ(tmp_path):
    # they never compared checksums: a command computing another tree was timed,
    # its ratio printed, exit 0 (the bench hunt, session 27; docs/performance.md:
    # results of the same work must agree)
    def rec(checksum, depth=6):
        return ('{"allocator": "x", "workload": "binary-trees", "params": {"depth": %d, '
                '"options": []}, "time_ns": 100, "checksum": "%s", "phases": [{"phase": '
                '"stretch", "ns": 1}], "error": null}' % (depth, checksum))
    good, bad = f"echo '{rec('0x1')}'", f"echo '{rec('0x2')}'"
    for mode in ("pair", "compare", "phases"):
        p = bench(mode, good, bad, "--rounds", "1")
        assert p.returncode == 1 and "CHECKSUMS DIFFER (binary-trees, the same work): " \
            "0x1 from #1 round 1; 0x2 from #2 round 1" in p.stderr, (mode, p.stderr)
        p = bench(mode, good, good, "--rounds", "1")
        assert p.returncode == 0 and "DIFFER" not in p.stderr + p.stdout, (mode, p.stderr)
    # other work (another depth): not compared, said so
    p = bench("compare", good, f"echo '{rec('0x2', depth=8)}'", "--rounds", "1")
    assert p.returncode == 0 and "commands doing different work" in p.stderr, p.stderr


def test_the_arms_environment_no_ld_preload_heaplab_options_recorded(tmp_path):
    # bench.py passed the caller's environment to every arm: LD_PRELOAD=libjemalloc
    # made the glibc arm jemalloc's, HEAPLAB_THP=populate made the 4 KiB fill arm
    # huge-page, and the records said nothing (the bench hunt, session 27)
    script = tmp_path / "env.sh"
    script.write_text('#!/bin/sh\necho \'{"workload": "fill", "params": {}, "time_ns": 1, '
                      '"checksum": "\'"${LD_PRELOAD:-none}"\'", "error": null}\'\n')
    script.chmod(0o755)
    p = bench("compare", str(script), str(script), "--rounds", "1",
              env={"LD_PRELOAD": "libc.so.6"})
    assert p.returncode == 0, p.stderr
    assert "LD_PRELOAD=libc.so.6 in the environment: not passed" in p.stderr, p.stderr
    # the checksum is what the benchmark saw: no LD_PRELOAD
    p2 = subprocess.run([sys.executable, "-c", f"""
import importlib.util, json, os, sys, subprocess
spec = importlib.util.spec_from_file_location("b", {BENCH!r}); b = importlib.util.module_from_spec(spec)
spec.loader.exec_module(b)
rec = b.record_of([{str(script)!r}], b._run([{str(script)!r}], 30))
print(rec["checksum"])"""], capture_output=True, text=True, env=dict(os.environ, LD_PRELOAD="libc.so.6"))
    assert p2.stdout.strip() == "none", (p2.stdout, p2.stderr)
    # HEAPLAB_<OPTION>: kept (docs/performance.md: they set heaplab options), warned
    # about, in the table and in every arm's JSON
    out = tmp_path / "r"
    p = bench("run", "--workload", "binary-trees", "--results", str(out),
              env={"HEAPLAB_THP": "populate", "HEAPLAB_BENCH_RUNS": "1",
                   "HEAPLAB_BENCH_DEPTH": "8"})
    assert p.returncode == 0, p.stderr
    assert "bench: warning: HEAPLAB_THP=populate in the environment: every heaplab arm" \
        in p.stderr, p.stderr
    assert p.stdout.startswith("ENVIRONMENT: HEAPLAB_THP=populate"), p.stdout[:200]
    import json
    data = json.loads((out / "binary-trees_glibc.json").read_text())
    assert data["provenance"]["env"] == {"HEAPLAB_THP": "populate"}, data["provenance"]


def test_thp_ab_bad_input_is_one_line(tmp_path):
    # --rounds 0: StatisticsError; an arm "thp" without '=': a JSONDecodeError hiding
    # bench-heaplab's usage; a missing @PATH: FileNotFoundError (the bench hunt, session 27)
    thp_ab = os.path.join(ROOT, "experiments", "bench", "thp_ab.py")
    for args, needle in [
            (["--rounds", "0", "thp=populate"], "--rounds 0: at least 1"),
            (["--rounds", "1", "thp"], "arm 'thp': 'thp' is not a heaplab option NAME=VALUE"),
            (["--rounds", "1", "@/nonexistent/bench-heaplab thp=populate"],
             "/nonexistent/bench-heaplab is not an executable file"),
            (["--rounds", "1", "--exe", str(tmp_path / "none"), "thp=populate"],
             "not an executable file")]:
        p = subprocess.run([sys.executable, thp_ab, *args], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 2 and needle in p.stderr, (args, p.stderr)
        assert "Traceback" not in p.stderr, p.stderr


def test_bench_program_refuses_an_overflowing_size_and_a_foreign_flag():
    # "17179869185g" wrapped to 1 GiB and ran; a flag the workload does not read was
    # taken and ignored (the bench hunt, session 27)
    build = os.environ.get("HEAPLAB_BUILD") or os.path.join(ROOT, "build")
    exe = os.path.join(build, "experiments", "bench", "bench-glibc")
    for args, needle in [
            (["fill", "--bytes", "17179869185g", "--size", "4096"],
             "--bytes 17179869185g: too large (more than 64 bits)"),
            (["fill", "--bytes", "18014398509481985k"], "too large (more than 64 bits)"),
            (["binary-trees", "--depth", "4", "--bytes", "1m"],
             "--bytes: not a flag of the binary-trees workload"),
            (["floor", "--warm"], "--warm: not a flag of the floor workload"),
            (["release", "--keep", "3"], "--keep: not a flag of the release workload")]:
        p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and needle in p.stderr and p.stdout == "", (args, p.stderr)
    p = subprocess.run([exe, "fill", "--bytes", "1m", "--size", "64"], capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0 and '"bytes": 1048576' in p.stdout, p.stderr


def test_class_model_refuses_bad_arguments(tmp_path):
    # atoi took "headerless -8" as 2^64 - 8 bytes and "abc" as 0; an unknown mode ran
    # the default tables (the bench hunt, session 27)
    exe = tmp_path / "class_model"
    subprocess.run(["cc", "-O2", os.path.join(ROOT, "experiments", "bench", "class_model.c"),
                    "-o", str(exe)], check=True, timeout=120)
    for args, needle in [(["headerless", "-8"], "headerless -8: BYTES is a whole number 0..1024"),
                         (["headerless", "abc"], "headerless abc: BYTES is a whole number"),
                         (["headerless", "2000"], "headerless 2000: BYTES is a whole number"),
                         (["nosuch"], "unknown mode 'nosuch'"),
                         (["borrow", "x"], "borrow takes no argument")]:
        p = subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)
        assert p.returncode == 2 and needle in p.stderr and p.stdout == "", (args, p.stderr)
