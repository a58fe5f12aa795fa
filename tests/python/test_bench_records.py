"""The benchmark's records (experiments/bench/bench.py run --results, make bench's
experiments/test_bench*.py): written whole, with their provenance, and the folder's
table and CSV made from every arm in it (the bench hunt, session 27).  The runs are
binary-trees at depth 8 (a fraction of a second); nothing here asserts a time."""
import ast
import json
import os
import resource
import signal
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "experiments", "bench", "bench.py")
TINY = {"HEAPLAB_BENCH_RUNS": "1", "HEAPLAB_BENCH_DEPTH": "8"}


def bench(*args, env=None, **kw):
    e = {k: v for k, v in os.environ.items()
         if not (k.startswith("HEAPLAB_") and k != "HEAPLAB_BUILD") and k != "LD_PRELOAD"}
    e.update(TINY)
    e.update(env or {})
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True,
                          timeout=120, env=e, **kw)


def small_file_limit():
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)      # EFBIG, as a full disk's ENOSPC
    resource.setrlimit(resource.RLIMIT_FSIZE, (2048, 2048))


def test_a_failed_save_leaves_the_earlier_records_whole(tmp_path):
    out = tmp_path / "r"
    p = bench("run", "--workload", "binary-trees", "--results", str(out))
    assert p.returncode == 0, p.stderr
    before = {f.name: f.read_text() for f in out.glob("*.json")}
    assert before
    # the same run again, its writes cut at 2 KiB (ulimit -f 2): open("w") left
    # truncated JSON where the complete files were
    p = bench("run", "--workload", "binary-trees", "--results", str(out),
              preexec_fn=small_file_limit)
    assert p.returncode == 1 and "the records could not be written" in p.stderr, p.stderr
    for f in out.glob("*.json"):
        json.loads(f.read_text())               # every one whole (the old or the new)
    assert not list(out.glob(".*.tmp")), "a temporary file was left behind"


def test_the_benchmarks_write_their_record_files_whole():
    # make bench's table.txt, preload.json and clients.json were written with open("w")
    for name in ("bench/bench.py", "test_bench.py", "test_bench_preload.py",
                 "test_bench_clients.py"):
        path = os.path.join(ROOT, "experiments", name)
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "open"
                    and any(isinstance(a, ast.Constant) and a.value in ("w", "wb")
                            for a in node.args[1:2])):
                # (bench.py's writable_folder probe: an empty file, then removed)
                probe = isinstance(node.args[0], ast.Name) and node.args[0].id == "probe"
                assert probe, f"{name}:{node.lineno}: a record file written with open('w'), " \
                              "not write_atomic"
