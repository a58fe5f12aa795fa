"""The heaplab command line: ``heaplab COMMAND`` or ``python3 -m heaplab COMMAND``.

Commands:

  options            the option table (name, default, range, description)
  stats              the names and meaning of every counter
  version            the library version (also: heaplab --version)
  report RESULTS     plots and tables for a results folder (docs/analysis.md);
                     needs the analysis extra (pandas, matplotlib)

``heaplab COMMAND --help`` describes each.  Exit status: 0 on success, 2 for
a usage error (an unknown command or option, a missing folder), 1 when the
command itself failed.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Callable, Dict, List, Optional

__all__ = ["main", "build_parser"]


def _cmd_options(args: argparse.Namespace) -> int:
    import heaplab
    table = heaplab.options()
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    for name, o in table.items():
        rng = "|".join(o["choices"]) if o["choices"] else f"[{o['min']}, {o['max']}]"
        print(f"{name:26} {str(o['default']):>12}  {rng:28} {o['description']}")
    return 0


def _cmd_stats(args: argparse.Namespace) -> int:
    from heaplab._heaplab import ffi, lib
    for i in range(lib.hl_stat_count()):
        print(f"{ffi.string(lib.hl_stat_name(i)).decode():26} "
              f"{ffi.string(lib.hl_stat_description(i)).decode()}")
    return 0


def _cmd_version(args: argparse.Namespace) -> int:
    import heaplab
    print(heaplab.__version__)
    return 0


def _cmd_report(args: argparse.Namespace) -> int:
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


def _version() -> str:
    try:
        import heaplab
        return f"heaplab {heaplab.__version__}"
    except ImportError as e:          # pragma: no cover - a broken install
        return f"heaplab (the compiled module does not load: {e})"


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the heaplab command (every subcommand)."""
    ap = argparse.ArgumentParser(
        prog="heaplab",
        description="heaplab: a garbage-collected heap and page allocator for experiments on "
                    "what the OS charges a process.",
        epilog="`heaplab COMMAND --help` describes a command. Experiments: "
               "python3 -m pytest experiments (docs/harness.md).")
    ap.add_argument("--version", action="version", version=_version())
    sub = ap.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    commands: Dict[str, Callable[[argparse.Namespace], int]] = {}

    p = sub.add_parser("options", help="the option table: name, default, range, description",
                       description="Every option of heaplab.Heap (and HEAPLAB_<NAME>) with "
                                   "its default and allowed range.")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    commands["options"] = _cmd_options

    sub.add_parser("stats", help="the names and meaning of every counter",
                   description="Every counter of Heap.stats(), with what it counts.")
    commands["stats"] = _cmd_stats

    sub.add_parser("version", help="the library version", description="Print the version.")
    commands["version"] = _cmd_version

    p = sub.add_parser("report", help="plots and tidy tables for a results folder",
                       description="Write the footprint, phase-cost and VMA plots and the "
                                   "tidy tables for a results folder (docs/analysis.md). "
                                   "Needs pandas and matplotlib (pip install 'heaplab[analysis]').")
    p.add_argument("results", help="a results folder (results/, results/latest, one "
                                   "experiment's results/E1, or a sweep's run folder)")
    p.add_argument("--out", help="where the files go (default: RESULTS/report)")
    p.add_argument("--dpi", type=int, default=110, help="PNG resolution (default 110)")
    commands["report"] = _cmd_report

    ap.set_defaults(_commands=commands)
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    """Run the heaplab command line; returns the exit status."""
    ap = build_parser()
    args = ap.parse_args(argv)
    if args.command is None:
        ap.print_help(sys.stderr)
        return 2
    try:
        return args._commands[args.command](args)
    except BrokenPipeError:
        # the reader went away (`heaplab options | head -1`): not an error of
        # ours; point stdout at /dev/null so the interpreter's own flush at
        # exit does not raise again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
