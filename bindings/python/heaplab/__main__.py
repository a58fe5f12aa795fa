"""python -m heaplab COMMAND

  options            the option table (name, default, range, description)
  stats              the names and meaning of every counter
  version            the library version
  preload            the path of libheaplab-malloc.so, for LD_PRELOAD
                     (LD_PRELOAD=$(python3 -m heaplab preload) PROGRAM...)
  report DIR [--out OUT]
                     plots and tables for a results folder (docs/analysis.md);
                     needs the analysis extra (pandas, matplotlib)
"""
import sys

import heaplab
from heaplab._heaplab import ffi, lib


def _options():
    for name, o in heaplab.options().items():
        rng = "|".join(o["choices"]) if o["choices"] else f"[{o['min']}, {o['max']}]"
        print(f"{name:26} {str(o['default']):>12}  {rng:28} {o['description']}")


def _stats():
    for i in range(lib.hl_stat_count()):
        print(f"{ffi.string(lib.hl_stat_name(i)).decode():26} "
              f"{ffi.string(lib.hl_stat_description(i)).decode()}")


def _report(argv):
    import argparse
    import os
    ap = argparse.ArgumentParser(prog="python -m heaplab report",
                                 description="Write the footprint, phase-cost and VMA plots and "
                                             "the tidy tables for a results folder.")
    ap.add_argument("results", help="a results folder (results/, or one experiment's results/E1)")
    ap.add_argument("--out", help="where the files go (default: RESULTS/report)")
    ap.add_argument("--dpi", type=int, default=110, help="PNG resolution (default 110)")
    args = ap.parse_args(argv)
    if not os.path.isdir(args.results):
        print(f"heaplab report: {args.results}: no such folder", file=sys.stderr)
        return 2
    if not 20 <= args.dpi <= 600:
        print(f"heaplab report: --dpi {args.dpi}: expected 20..600", file=sys.stderr)
        return 2
    try:
        from . import analysis
    except ImportError as e:
        print(f"heaplab report: {e}", file=sys.stderr)
        return 2
    try:
        written = analysis.report(args.results, args.out, dpi=args.dpi, log=print)
    except ValueError as e:
        print(f"heaplab report: {e}", file=sys.stderr)
        return 2
    print(f"{len(written)} files in {os.path.dirname(written[0]) if written else args.out}")
    return 0


def main(argv):
    if argv and argv[0] == "report":
        return _report(argv[1:])
    if argv and argv[0] == "preload":
        try:
            print(heaplab.preload_path())
        except heaplab.Error as e:
            print(f"heaplab preload: {e}", file=sys.stderr)
            return 2
        return 0
    cmds = {"options": _options, "stats": _stats, "version": lambda: print(heaplab.__version__)}
    if len(argv) < 1 or argv[0] not in cmds:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    cmds[argv[0]]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
