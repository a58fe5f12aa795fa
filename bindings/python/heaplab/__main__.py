"""The heaplab command line: ``heaplab COMMAND`` or ``python3 -m heaplab COMMAND``.

Commands:

  options            the option table (name, default, range, description)
  stats              the names and meaning of every counter
  version            the library version (also: heaplab --version)
  preload            the path of libheaplab-malloc.so, for LD_PRELOAD
                     (LD_PRELOAD=$(heaplab preload) PROGRAM...)
  report RESULTS     plots and tables for a results folder or a sweep's run
                     folder (docs/analysis.md); needs pandas and matplotlib
  run EXPERIMENT     a sweep: option grid x arms x repeats, each an isolated
                     process on a Dask worker (docs/harness.md); needs the
                     sweep extra (distributed)
  compare RUN RUN    per effect, the two runs' medians, ratio and whether the
                     difference exceeds the run-to-run spread

``heaplab COMMAND --help`` describes each.  Exit status: 0 on success, 2 for
a usage error (an unknown command or option, a missing folder), 1 when the
command itself failed.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import signal
import sys
from typing import Any, Callable, Dict, List, Optional

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


def _cmd_preload(args: argparse.Namespace) -> int:
    import heaplab
    try:
        print(heaplab.preload_path())
    except heaplab.Error as e:
        print(f"heaplab preload: {e}", file=sys.stderr)
        return 2
    return 0


def _cli_hint(msg: str, command: str) -> str:
    """A library error's Python hint in the CLI's words: 'pass failed=...'
    is --failed; 'pass skipped=[] to run_records/load_arms' (a damaged
    record) has no option here: move the file away and run it again."""
    msg = msg.replace("pass failed='flag'", "pass --failed flag").replace(
        "failed='drop'", "--failed drop")
    return re.sub(r"; remove it, or pass skipped=\[\] to \w+ to load the others",
                  f"; remove it or move it out of the folder, then run heaplab {command} "
                  f"again to read the others", msg)


def _cmd_report(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.results):
        # (a file was "no such folder" too)
        # (a fresh clone has no results/: say what writes one)
        what = ("not a folder (a results folder: the <experiment>/<arm>.json files under it)"
                if os.path.exists(args.results) else
                "no such folder (`python3 -m pytest experiments` -- make experiments -- writes "
                "results/, `heaplab run` a sweep's results/<run-id>)")
        print(f"heaplab report: {args.results}: {what}", file=sys.stderr)
        return 2
    if not 20 <= args.dpi <= 600:
        print(f"heaplab report: --dpi {args.dpi}: expected 20..600", file=sys.stderr)
        return 2
    # RESULTS resolved once (RESULTS/latest may be re-pointed by a sweep
    # starting meanwhile): the kind of folder and its report are one run's
    results = os.path.realpath(args.results)
    # the arguments the library would refuse without reading a record, refused
    # before pandas and matplotlib are imported (0.95 CPU s, session 44: an
    # empty folder or an --out that is a file paid it), in its words and
    # order: a results folder with no JSON file at all, then --out (or
    # RESULTS/report) a file
    from .harness import (REPORT_OUT_ROLE, _holds_no_json, _no_arm_results,
                          _not_a_folder)
    from .sweep import RUN_META
    problem = None
    if not os.path.isfile(os.path.join(results, RUN_META)) and _holds_no_json(results):
        problem = _no_arm_results(results)
    if not problem:
        out = os.path.realpath(args.out or os.path.join(results, "report"))
        problem = _not_a_folder(out, out, REPORT_OUT_ROLE)
    if problem:
        print(f"heaplab report: {problem}", file=sys.stderr)
        return 2
    try:
        from . import analysis
    except ImportError as e:
        print(f"heaplab report: {e}", file=sys.stderr)
        return 2
    import warnings
    done: List[str] = []

    def log(msg: str) -> None:
        if msg.startswith("wrote "):
            done.append(msg[len("wrote "):])
        print(msg, flush=True)

    def incomplete() -> str:
        # (a report stopped part-way looked complete: the files it had
        # written, the last report's beside them, and nothing said so)
        # (the folder keeps INCOMPLETE-REPORT.txt, which says so later)
        return (f"the report in {os.path.dirname(done[-1])} is incomplete: {len(done)} "
                f"file(s) written before it stopped (above; the folder keeps "
                f"{analysis.INCOMPLETE_MARKER} until a report there completes); "
                f"run heaplab report again"
                if done else "no file of the report written")
    try:
        with warnings.catch_warnings():
            # the library's warnings (a copy of an arm, a file left out) as
            # the command's lines, where they were Python's: the path and
            # line of heaplab's source, then that line of code
            warnings.showwarning = _say_warning("report")
            written = _report(args, analysis, results, log)
    except ValueError as e:
        # (refused records are refused before anything is written; a plot
        # refused part-way left its report's first files, nothing said)
        print(f"heaplab report: {_cli_hint(str(e), 'report')}"
              + (f"; {incomplete()}" if done else ""), file=sys.stderr)
        return 2
    except OSError as e:
        # a file that went away or could not be written meanwhile (another
        # process writing the folder, a full disk): one line, not a traceback
        print(f"heaplab report: {e}; {incomplete()}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"heaplab report: interrupted; {incomplete()}", file=sys.stderr)
        return 130
    print(f"{len(written)} files in {os.path.dirname(written[0]) if written else args.out}")
    return 0


def _say_warning(command: str) -> Callable[..., None]:
    """A warnings.showwarning that prints 'heaplab COMMAND: warning: ...'."""
    def show(message: Any, category: Any, filename: str, lineno: int, file: Any = None,
             line: Optional[str] = None) -> None:
        print(f"heaplab {command}: warning: {str(message).removeprefix('heaplab: ')}",
              file=sys.stderr, flush=True)
    return show


def _report(args: argparse.Namespace, analysis: Any, results: str,
            log: Callable[[str], None]) -> List[str]:
    """The report of RESULTS (a sweep's run folder or a results folder)."""
    if analysis.is_run_folder(results):
        return analysis.report_run(results, args.out, dpi=args.dpi, log=log)
    return analysis.report(results, args.out, dpi=args.dpi, log=log, failed=args.failed)


def _cmd_run(args: argparse.Namespace) -> int:
    from . import sweep
    # SIGTERM (kill, a batch system's stop) and SIGHUP (the terminal closed)
    # stop the run as Ctrl-C does
    with sweep.stop_on_signals():
        return _run(args, sweep)


def _run(args: argparse.Namespace, sweep: Any) -> int:
    try:
        grid = sweep.parse_set(args.set)
        arms = [a for a in args.arms.split(",") if a] if args.arms is not None else None
        arm_env: Dict[str, Dict[str, str]] = {}
        for item in args.arm_env:
            arm, colon, kv = item.partition(":")
            name, eq, value = kv.partition("=")
            if not colon or not eq or not name:
                raise sweep.SweepError(f"--arm-env {item!r}: expected ARM:NAME=VALUE")
            arm_env.setdefault(arm, {})[name] = value
        env: Dict[str, str] = {}
        for item in args.env:
            name, eq, value = item.partition("=")
            if not eq or not name:
                raise sweep.SweepError(f"--env {item!r}: expected NAME=VALUE")
            env[name] = value
        if args.resume == "latest":
            args.resume = os.path.realpath(os.path.join(args.results, "latest"))
        source: Optional[str] = None
        cwd: Optional[str] = None
        timeout = 600.0 if args.timeout is None else args.timeout
        if args.resume:
            # the run's meta.json defines the sweep: what the command line
            # gives beside --resume must be the run's own (a --set, an
            # experiment, an --env of another sweep filed its records in
            # this run's cells, or ran them at another size)
            meta = sweep.load_meta(args.resume)

            def value(*keys: str) -> Any:
                return sweep.meta_value(meta, args.resume, *keys)
            experiment = value("experiment")
            command = None
            if meta.get("kind") == "command":
                command = shlex.join(value("spec", "argv"))
            run_arms, run_grid, run_repeat = value("arms"), value("grid"), value("repeat")
            # (arms null or runs {} were TypeError / AttributeError tracebacks,
            # 'ab' read as arms a and b, a grid of numbers failed every task)
            for k, ok in (("arms", isinstance(run_arms, list)
                           and all(isinstance(a, str) for a in run_arms)),
                          ("grid", isinstance(run_grid, dict) and all(
                              isinstance(v, list) and all(isinstance(x, str) for x in v)
                              for v in run_grid.values())),
                          ("repeat", isinstance(run_repeat, int)
                           and not isinstance(run_repeat, bool)),
                          ("runs", isinstance(meta.get("runs", []), list))):
                if not ok:
                    raise sweep.SweepError(f"{os.path.join(args.resume, sweep.RUN_META)}: "
                                           f"['{k}'] is not what heaplab run writes; cannot "
                                           f"resume it")
            given: List[str] = []
            if args.experiment is not None and args.experiment.lower() != str(experiment).lower():
                given.append(f"the experiment {args.experiment!r} (the run's: {experiment!r})")
            if args.command is not None and (command is None or shlex.split(args.command)
                                             != shlex.split(command)):
                given.append(f"--command {args.command!r} (the run's: {command!r})")
            if args.set and list(grid.items()) != list(run_grid.items()):
                given.append(f"--set {grid} (the run's grid: {run_grid})")
            if arms is not None and list(arms) != list(run_arms):
                given.append(f"--arms {','.join(arms)} (the run's: {','.join(run_arms)})")
            if args.repeat is not None and args.repeat != run_repeat:
                given.append(f"--repeat {args.repeat} (the run's: {run_repeat})")
            old = [k for k in ("env", "arm_env", "timeout") if k not in meta]
            for k, ok in (("env", isinstance(meta.get("env", {}), dict)),
                          ("arm_env", isinstance(meta.get("arm_env", {}), dict) and all(
                              isinstance(e, dict) for e in meta.get("arm_env", {}).values())),
                          ("timeout", isinstance(meta.get("timeout", 600), (int, float)))):
                if not ok:
                    raise sweep.SweepError(f"{os.path.join(args.resume, sweep.RUN_META)}: "
                                           f"['{k}'] is not what heaplab run writes; cannot "
                                           f"resume it")
            if "env" in meta:
                if args.env and env != meta["env"]:
                    given.append(f"--env {env} (the run's: {meta['env']})")
                env = dict(meta["env"])
            if "arm_env" in meta:
                if args.arm_env and arm_env != meta["arm_env"]:
                    given.append(f"--arm-env {arm_env} (the run's: {meta['arm_env']})")
                arm_env = {a: dict(e) for a, e in meta["arm_env"].items()}
            if "timeout" in meta:
                if args.timeout is not None and args.timeout != meta["timeout"]:
                    given.append(f"--timeout {args.timeout:g} (the run's: {meta['timeout']:g})")
                timeout = meta["timeout"]
            if given:
                raise sweep.SweepError(
                    f"--resume {args.resume}: the run is defined by its meta.json; "
                    f"{'; '.join(given)} differ(s) from it: leave {'it' if len(given) == 1 else 'them'} "
                    f"out to resume the run, or start a new run without --resume")
            if old:
                print(f"heaplab run: warning: {os.path.join(args.resume, sweep.RUN_META)} has no "
                      f"{', '.join(old)} (a run of an older heaplab): the resumed tasks get the "
                      f"--env, --arm-env and --timeout given now "
                      f"({'none' if not (args.env or args.arm_env) else 'given'}); records of "
                      f"another environment than their task's are run again", file=sys.stderr)
            args.experiment, args.command = experiment, command
            arms, grid, args.repeat = list(run_arms), dict(run_grid), run_repeat
            run_id = value("run_id")
            # the tasks run where the run's ran, on the experiment file it
            # found: a --command's relative paths failed when resumed from
            # elsewhere, and an experiment file of the user's own was looked
            # for by its name in heaplab's catalog (never found)
            spec = meta.get("spec") if isinstance(meta.get("spec"), dict) else {}
            where = spec.get("script" if meta.get("kind") == "lua" else "path")
            if meta.get("kind") in ("python", "lua") and isinstance(where, str) \
                    and os.path.isfile(where):
                source = where
            elif meta.get("kind") in ("python", "lua") and where:
                print(f"heaplab run: warning: the run's experiment file {where} is gone: "
                      f"resuming {experiment} as found now", file=sys.stderr)
            run_cwd = meta.get("cwd")
            if isinstance(run_cwd, str) and os.path.isdir(run_cwd):
                cwd = run_cwd
            else:
                print(f"heaplab run: warning: the run's working directory {run_cwd} is gone: "
                      f"its tasks run in {os.getcwd()}", file=sys.stderr)
        else:
            run_id = None
        repeat = 1 if args.repeat is None else args.repeat
        sw = sweep.build_sweep(args.experiment, arms=arms, grid=grid, repeat=repeat,
                               command=args.command, arm_env=arm_env, env=env,
                               timeout=timeout, run_id=run_id, source=source, cwd=cwd)
        progress = None if args.progress == "auto" else args.progress == "live"
        print(f"heaplab run: {sw.experiment}, {len(sw.cells)} cell(s) x {len(sw.arms)} arm(s) x "
              f"{sw.repeat} repeat(s) = {len(sw.tasks)} tasks on "
              f"{args.cluster if args.cluster != 'local' else f'a local cluster of {args.workers} worker(s)'}",
              flush=True)
        run_dir, counts = sweep.run_sweep(sw, results=args.results, cluster=args.cluster,
                                          workers=args.workers, per_worker=args.per_worker,
                                          resume=args.resume, argv=sys.argv, progress=progress)
    except (sweep.SweepError, FileNotFoundError) as e:
        print(f"heaplab run: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        # (a second Ctrl-C in the first one's clean-up: the first one, its
        # context, knows the run folder)
        where, first = None, e
        while where is None and first is not None:
            where, first = getattr(first, "run_dir", None), first.__context__
        signum = sweep.stop_signal(e)
        word = {signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}.get(signum, "interrupted")
        try:
            print(f"{word}: heaplab run --resume {where}" if where else word,
                  file=sys.stderr, flush=True)
        except OSError:         # (SIGHUP: the terminal may be gone)
            pass
        # the stop is said and the cluster closed: a further Ctrl-C ends the
        # process at once (SIGINT's default action) -- in the interpreter's
        # shutdown it printed an 'Exception ignored in threading' traceback
        if callable(signal.getsignal(signal.SIGINT)):
            signal.signal(signal.SIGINT, signal.SIG_DFL)
        return 128 + signum
    print(f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} already complete: "
          f"{run_dir}")
    return 1 if counts["failed"] else 0


def _cmd_compare(args: argparse.Namespace) -> int:
    # a share of the median: nan made nothing significant without a word, a
    # negative share made every difference above the spread significant
    if not 0 <= args.tolerance < float("inf"):
        print(f"heaplab compare: --tolerance {args.tolerance}: expected a finite share of the "
              f"median >= 0 (0.02 is 2%)", file=sys.stderr)
        return 2
    # the run folders are checked before pandas is imported (half a second:
    # `report` checked its folder first, compare imported pandas first)
    from .sweep import RUN_META, not_a_run_folder  # (the words of `run --resume`)
    for run in (args.run_a, args.run_b):
        if not os.path.isfile(os.path.join(run, RUN_META)):
            # (a newcomer's two `pytest experiments` results folders: say
            # what compare takes, and what reads those)
            hint = ("; compare takes two sweeps' run folders (heaplab run's "
                    "RESULTS/<run-id>); a results folder is heaplab report's"
                    if os.path.isdir(run) else "")
            print(f"heaplab compare: {run}: {not_a_run_folder(run)}{hint}", file=sys.stderr)
            return 2
    if os.path.realpath(args.run_a) == os.path.realpath(args.run_b):
        # (a run against itself: every effect "no" difference, exit 0)
        print(f"heaplab compare: {args.run_a} and {args.run_b} are the same run folder "
              f"({os.path.realpath(args.run_a)}): name two runs", file=sys.stderr)
        return 2
    try:
        from . import analysis
    except ImportError as e:
        print(f"heaplab compare: {e}", file=sys.stderr)
        return 2
    import warnings
    caught: List[Any] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            t = analysis.compare_runs(args.run_a, args.run_b, tolerance=args.tolerance)
    except ValueError as e:
        # the warnings first (a run whose every task failed: they say why
        # there is "no effect in common")
        for w in caught:
            _say_warning("compare")(w.message, w.category, w.filename, w.lineno)
        print(f"heaplab compare: {_cli_hint(str(e), 'compare')}", file=sys.stderr)
        return 2
    for w in caught:
        _say_warning("compare")(w.message, w.category, w.filename, w.lineno)
    if args.effect:
        t = t[t["effect"].isin(args.effect)]
        if t.empty:
            print(f"heaplab compare: no effect {args.effect} in both runs", file=sys.stderr)
            return 2
    if args.json:
        print(t.to_json(orient="records", indent=1))
    else:
        from .pytest_plugin import render_effects
        opts = [c for c in t.columns if c not in ("experiment", "arm", "effect", "unit",
                                                  "median_a", "median_b", "ratio", "spread",
                                                  "n_a", "n_b", "significant")]
        rows = []
        for r in t.itertuples(index=False):
            d = r._asdict()
            cell = ", ".join(f"{o}={d[o]}" for o in opts)
            rows.append((d["experiment"], d["arm"], d["effect"] + (f" [{d['unit']}]" if d["unit"] else ""),
                         cell, f"{d['median_a']:.4g}", f"{d['median_b']:.4g}",
                         "" if d["ratio"] != d["ratio"] else f"{d['ratio']:.3f}",
                         f"{d['spread']:.3g}", "YES" if d["significant"] else "no"))
        print(f"A = {args.run_a}\nB = {args.run_b}  (medians over repeats; significant = the "
              f"difference exceeds the larger run-to-run spread and {args.tolerance:.0%})")
        print(render_effects(rows, columns=("experiment", "arm", "effect", "cell", "median A",
                                            "median B", "B/A", "spread", "significant")))
        n = int(t["significant"].sum())
        print(f"{n} of {len(t)} effect(s) differ significantly")
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
    sub = ap.add_subparsers(dest="_command", metavar="COMMAND", title="commands")
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

    sub.add_parser("preload", help="the path of libheaplab-malloc.so, for LD_PRELOAD",
                   description="Print the path of libheaplab-malloc.so ($HEAPLAB_PRELOAD when "
                               "set, else the copy installed with this package): "
                               "LD_PRELOAD=$(heaplab preload) PROGRAM runs PROGRAM on "
                               "heaplab's manual mode (docs/clients.md).")
    commands["preload"] = _cmd_preload

    p = sub.add_parser("report", help="plots and tidy tables for a results folder",
                       description="Write the footprint, phase-cost and VMA plots and the "
                                   "tidy tables for a results folder (docs/analysis.md). "
                                   "Needs pandas and matplotlib (pip install 'heaplab[analysis]').")
    p.add_argument("results", help="a results folder (results/, results/latest, one "
                                   "experiment's results/E1, or a sweep's run folder)")
    p.add_argument("--out", help="where the files go (default: RESULTS/report)")
    p.add_argument("--dpi", type=int, default=110, help="PNG resolution (default 110)")
    p.add_argument("--failed", choices=("raise", "flag", "drop"), default="raise",
                   help="records of phases that raised or of failed arms: refuse them "
                        "(raise, the default), keep them with their status (flag) or leave "
                        "them out (drop)")
    commands["report"] = _cmd_report

    p = sub.add_parser(
        "run", help="a sweep: option grid x arms x repeats on Dask workers",
        description="Expand an option grid x arms x repeats and run every task as an isolated "
                    "process on a Dask worker (one arm at a time per worker); records go to "
                    "RESULTS/<run-id>/ with meta.json, RESULTS/latest points to it "
                    "(docs/harness.md, 'Sweeps').",
        epilog="examples: heaplab run e1 --set warm_pages=0,64 --set page_size=16k,64k "
               "--repeat 3;  heaplab run lua:e1_page_floor --set HEAPLAB_E1_FILL_MIB=32,64;  "
               "heaplab run --command 'build/clients/heaplab-lua "
               "tests/clients/programs/page_floor.lua {arm} 64' --arms lua/on,lua/off "
               "--arm-env lua/off:HEAPLAB_PAGE_RELEASE=false")
    p.add_argument("experiment", nargs="?",
                   help="e1, E4b, a path to an experiment module, lua:e1_page_floor; omit "
                        "with --command (or --resume)")
    p.add_argument("--arms", help="comma-separated arms (default: all)")
    p.add_argument("--set", action="append", default=[], metavar="NAME=V1,V2",
                   help="a grid dimension: an option (warm_pages=0,64; sizes take k/m/g) or an "
                        "environment variable in capitals (HEAPLAB_E1_FILL_MIB=32,64); repeatable")
    p.add_argument("--repeat", type=int, default=None, help="repeats of every cell x arm (1)")
    p.add_argument("--cluster", default="local",
                   help="local (a LocalCluster, the default) or tcp://HOST:PORT of a "
                        "`dask scheduler`")
    p.add_argument("--workers", type=int, default=2, help="local cluster: worker processes (2)")
    p.add_argument("--per-worker", type=int, default=1,
                   help="arms one worker runs at once (1: footprints are never shared)")
    p.add_argument("--results", default="results", help="where run folders go (results)")
    p.add_argument("--resume", metavar="RUN", nargs="?", const="latest",
                   help="a run folder (default: RESULTS/latest): run only its tasks whose "
                        "records are missing or failed, as its meta.json defines them "
                        "(experiment, --arms, --set, --repeat, --env, --arm-env, --timeout "
                        "given beside it must be the run's own)")
    p.add_argument("--timeout", type=float, default=None,
                   help="seconds one arm may run before it is killed and recorded failed "
                        "(600; --resume: the run's)")
    p.add_argument("--command", help="a command line that is one arm ({arm} = the arm's name); "
                                     "it prints the arm JSON (docs/harness.md)")
    p.add_argument("--arm-env", action="append", default=[], metavar="ARM:NAME=VALUE",
                   help="an environment variable for one arm of --command; repeatable")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="an environment variable for every task; repeatable")
    p.add_argument("--progress", choices=("auto", "live", "plain"), default="auto",
                   help="live display (rich) or one line per task; auto: live on a terminal")
    commands["run"] = _cmd_run

    p = sub.add_parser("compare", help="compare two sweep runs effect by effect",
                       description="For every effect in both runs (same experiment, arm and "
                                   "option values): the two medians over repeats, their ratio, "
                                   "and whether the difference exceeds the run-to-run spread.")
    run_help = ("a sweep's run folder: RESULTS/<run-id> of `heaplab run` (it holds "
                "meta.json), or results/latest; not a results folder of `pytest "
                "experiments` (heaplab report reads those)")
    p.add_argument("run_a", metavar="RUN_A", help=run_help)
    p.add_argument("run_b", metavar="RUN_B", help="another run folder, compared with RUN_A "
                                                   "(B/A)")
    p.add_argument("--effect", action="append", help="only this effect (repeatable)")
    p.add_argument("--tolerance", type=float, default=0.02,
                   help="a difference below this share of the median is never significant (0.02)")
    p.add_argument("--json", action="store_true", help="print the table as JSON records")
    commands["compare"] = _cmd_compare

    ap.set_defaults(_commands=commands)
    return ap


def main(argv: Optional[List[str]] = None) -> int:
    """Run the heaplab command line; returns the exit status."""
    ap = build_parser()
    args = ap.parse_args(argv)
    if args._command is None:
        ap.print_help(sys.stderr)
        return 2
    try:
        return args._commands[args._command](args)
    except BrokenPipeError:
        # the reader went away (`heaplab options | head -1`): not an error of
        # ours; point stdout at /dev/null so the interpreter's own flush at
        # exit does not raise again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        # (report and run say theirs, with what they leave; compare -- its
        # runs read, nothing written -- exited 130 without a word)
        try:
            print(f"heaplab {args._command}: interrupted", file=sys.stderr, flush=True)
        except OSError:
            pass
        return 130


if __name__ == "__main__":
    sys.exit(main())
