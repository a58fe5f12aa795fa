"""A/B of the huge-page fill (issue 19, docs/performance.md, fourth round item 21).

    python3 experiments/bench/thp_ab.py [--rounds N] [--exe PATH] "OPTIONS A" "OPTIONS B" ...

An arm "@PATH OPTIONS" runs the bench-heaplab at PATH instead (two builds side by side).

Each arm is a set of heaplab options ("thp=populate thp_prefault=0").  Every measured run of
`bench-heaplab fill --bytes 201326592 --size 256` comes right after a warm-up huge-page fill
(thp=populate, discarded), so that every arm gets 2 MiB blocks freed a moment ago rather
than ones this VM's free page reporting gave back to its host (which fault on the host too
and make the fill 10-40x slower: item 21).  The arms run in turn, the order reversed every
round; the fastest three runs and the median of each, the load average before and after.

Unlike `bench.py pair` the commands run one at a time and unpinned: the prefault helper
(thp_prefault) needs the second CPU.  --floor adds the 4 KiB page-fault floor as an arm
(after the same warm-up; until 2026-12-02 11:30 it had none) and prints each arm's ratio to it.  --bound (with --floor) adds what no
page supply can beat: `fill --warm` (a fill into the resident pages of a dropped one, no fault
in its timed part; thp=populate page_release=0) and the floor's `rewrite_ns` (the same bytes
written again into the floor's resident mapping), each as a ratio to the floor too."""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FILL = ["fill", "--bytes", "201326592", "--size", "256"]


def arm_exe(default, arm):
    """An arm "@PATH options..." runs the bench-heaplab at PATH (an A/B of two builds)."""
    if arm.startswith("@"):
        exe, _, options = arm[1:].partition(" ")
        return exe, options
    return default, arm


def run(exe, args, options):
    cmd = [exe, *args] + sum((["-o", o] for o in options.split()), [])
    try:
        p = subprocess.run(cmd, capture_output=True, text=True,
                           env=dict(os.environ, MALLOC_PERTURB_="0"))
    except OSError as e:
        sys.exit(f"thp_ab: cannot start {exe}: {e.strerror or e}")
    try:
        rec = json.loads(p.stdout)
    except ValueError:
        # (the program's usage message was hidden behind a JSONDecodeError traceback)
        err = p.stderr.strip().splitlines()
        sys.exit(f"thp_ab: {' '.join(cmd)}: exit {p.returncode}, no record"
                 + (f": {err[0]}" if err else ""))
    if not isinstance(rec, dict) or rec.get("error") or p.returncode:
        sys.exit(f"thp_ab: {' '.join(cmd)}: {rec.get('error') if isinstance(rec, dict) else rec} "
                 f"(exit {p.returncode})")
    return rec


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("arms", nargs="+", help='heaplab options per arm, e.g. "thp=populate"')
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--exe", default=os.path.join(HERE, "..", "..", "build", "experiments",
                                                  "bench", "bench-heaplab"))
    ap.add_argument("--floor", action="store_true", help="also the 4 KiB page-fault floor")
    ap.add_argument("--bound", action="store_true",
                    help="with --floor: also a fill into resident pages and the floor's rewrite")
    a = ap.parse_args()
    if a.bound and not a.floor:
        ap.error("--bound needs --floor (its figures are ratios to the floor)")
    if a.rounds < 1:
        ap.error(f"--rounds {a.rounds}: at least 1")
    for arm in a.arms:       # checked before anything runs: one line each
        exe, options = arm_exe(a.exe, arm)
        if arm.startswith("@") and not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            ap.error(f"arm {arm!r}: {exe} is not an executable file")
        for o in options.split():
            if "=" not in o or o.startswith("="):
                ap.error(f"arm {arm!r}: {o!r} is not a heaplab option NAME=VALUE")
    if not (os.path.isfile(a.exe) and os.access(a.exe, os.X_OK)):
        ap.error(f"--exe {a.exe}: not an executable file (make builds bench-heaplab)")
    warm = "warm fill (thp=populate page_release=0)"
    arms = (["floor"] if a.floor else []) + a.arms + ([warm, "rewrite"] if a.bound else [])
    times = {arm: [] for arm in arms}
    helper = {arm: [] for arm in arms}
    load0 = os.getloadavg()[0]
    for i in range(a.rounds):
        for arm in (arms if i % 2 == 0 else arms[::-1]):
            if arm == "rewrite":
                continue  # (a figure of the floor's run)
            if arm == "floor":
                run(a.exe, FILL, "thp=populate thp_prefault=0")  # the same warm-up
                rec = run(a.exe, ["floor"] + FILL[1:], "")
                if a.bound:
                    times["rewrite"].append(rec["notes"]["rewrite_ns"] / 1e6)
                    helper["rewrite"].append(0)
            elif arm == warm:
                rec = run(a.exe, FILL + ["--warm"], "thp=populate page_release=0")
                if rec["notes"]["timed_minflt"] > 64:
                    sys.exit(f"fill --warm faulted {rec['notes']['timed_minflt']} pages in its "
                             "timed part: not a bound")
            else:
                exe, options = arm_exe(a.exe, arm)
                run(exe, FILL, "thp=populate thp_prefault=0")  # warm-up, discarded
                rec = run(exe, FILL, options)
            times[arm].append(rec["time_ns"] / 1e6)
            helper[arm].append(rec.get("notes", {}).get("thp_prefault_chunks", 0))
    print(f"{a.rounds} rounds, load average {load0:.2f} -> {os.getloadavg()[0]:.2f}")
    for arm in arms:
        v = sorted(times[arm])
        fast = " ".join(f"{t:7.1f}" for t in v[:3])
        line = (f"{arm:40} fastest {fast}  median "
                f"{statistics.median(v):7.1f} ms  helper chunks (median) "
                f"{statistics.median(helper[arm]):.0f}")
        if a.floor and arm != "floor":
            f = sorted(times["floor"])
            line += (f"  / floor {v[0] / f[0]:.3f} fastest, "
                     f"{statistics.median(v) / statistics.median(f):.3f} median")
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
