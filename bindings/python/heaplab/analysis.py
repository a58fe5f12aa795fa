"""Results as pandas DataFrames, and the plots people look at.

The harness writes one JSON per arm (docs/harness.md); an arm run live from a
notebook returns the same JSON wrapped in an ArmResult.  Everything here takes
either, as a `source`:

    a results folder (str / Path; every arm JSON under it, recursively),
    one arm JSON file, an ArmResult, {arm: ArmResult} as Experiment.run()
    returns it, a raw arm dict, or a list of any of these.  An ArmResult of
    Experiment.run(repeat=N) is its N runs (ArmResult.repeats), tagged
    repeat=k as their saved <arm>.r<k>.json files are.

    import heaplab.analysis as hla
    df = hla.records_frame("results/E1")     # tidy: one row per arm x phase x figure
    hla.wide(df)                             # arm x phase rows, figures as columns, MiB
    hla.plot_footprint(res)                  # footprint over time, phases marked
    hla.plot_phase_cost(res)                 # per-phase cost per arm (bars)
    hla.plot_vmas(res)                       # VMAs over the heap after each phase / round
    hla.report("results")                    # all of it as PNG + CSV files

pandas and matplotlib are the `analysis` extra (`pip install .[analysis]`);
the core package does not need them.  Plots are built on matplotlib.figure.Figure
directly (no pyplot state), so they work headless and nothing leaks between
calls; in a notebook, make the Figure the cell's last expression to show it.
"""
from __future__ import annotations

import contextvars
import functools
import glob
import json
import math
import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple, Union

try:
    import numpy as np
    import pandas as pd
    from matplotlib.figure import Figure
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError(f"heaplab.analysis needs pandas and matplotlib ({e}); "
                      "install them with: pip install 'heaplab[analysis]'") from None

from .harness import (DERIVED_FIGURES, FIGURES, REPORT_OUT_ROLE, SKIPPED, _arm_problem, _real,
                      derived_figures, error_summary, load_arms, load_json_record, _make_folder,
                      _no_arm_results, phase_status, _proc_stat, repeats_mismatch,
                      _runs_left_out, sweep_runs_under, write_atomic)

MiB = 1 << 20

# Units of the phase-record figures (docs/harness.md).  Everything else is
# named by its suffix, see unit_of().
RECORD_UNITS = {f: "bytes" for f in FIGURES}
RECORD_UNITS.update({"duration_s": "s", "vmas_after": "count", "samples": "count"})

# Figures computed from a record's own figures (source "derived"), all bytes:
# name -> what it is, from the one definition (heaplab.harness.DERIVED_FIGURES,
# computed by derived_figures for every reader).
DERIVED = {name: f"{a} - {b}: {what}" for name, (a, b, what) in DERIVED_FIGURES.items()}

# Notes whose names do not carry their unit (experiments' own figures): every
# numeric note an experiment writes is named here or by its suffix (a test
# greps experiments/ for them): an integer note fell to "count" unseen --
# E9's used_memory and E7's page_size are bytes, E7's mark_ms_per_cycle ms.
NOTE_UNITS = {"peak_large_live": "bytes", "mark_s": "s", "used_memory": "bytes",
              "page_size": "bytes", "mark_ms_per_cycle": "ms", "thp_enabled": "flag",
              "word": "address"}
NOTE_UNITS.update({k: "count" for k in (
    "armed_after_round", "backlog", "cycles", "cycles_to_major", "data_pages", "failed_pages",
    "fired", "fresh", "heap_pages", "inside_reservation", "kept_objects", "limit",
    "major_backstop", "major_quiet", "major_sweeps", "major_swept_pages", "maps",
    "maps_at_limit", "maps_before", "maps_end", "objects", "pacing_timeouts", "pacing_waits",
    "pages_hit", "partial_pages", "refused", "release_syscalls", "released", "released_pages",
    "released_pool", "restore_failed_pages", "restore_fired", "reuse_attempts", "reused",
    "reused_pages", "survivors", "syscalls", "thp_chunks_released", "thp_splits", "trims",
    "vmas_after_release", "vmas_after_reuse", "words")})
# Notes that are no figure (strings, booleans, lists, dicts; a checksum): no row.
NOTE_NOT_FIGURES = frozenset((
    "answers_checked", "checksum", "checksums", "end", "events", "expected_checksum", "figures",
    "fresh_pages_by_round", "info", "injected", "mark", "per_trim", "pipe", "reference", "rounds",
    "series", "stats_when_armed", "walls"))

COLUMNS = ["experiment", "arm", "repeat", "phase", "index", "figure", "value", "unit", "source",
           "status"]
SERIES_COLUMNS = ["experiment", "arm", "t_s", "phys", "rss", "lazyfree", "phase"]
PHASE_COLUMNS = ["experiment", "arm", "index", "phase", "t_start_s", "t_end_s", "duration_s",
                 "mark", "mark_s"]

_SUFFIX_UNITS = (("_mib_s", "MiB/s"), ("_bytes", "bytes"), ("_mib", "MiB"), ("_ns", "ns"),
                 ("_ms", "ms"), ("_us", "us"), ("_s", "s"), ("_pct", "%"))


def unit_of(name: str, value: Any = None, source: str = "note") -> str:
    """The unit of a figure from its name: a known record figure, else its
    suffix (_bytes, _mib, _mib_s, _s, _ms, _us, _ns, _pct) or a `bytes` word
    inside it; a stat or an integer note without a unit is a count; anything
    else is ''."""
    if source == "record" and name in RECORD_UNITS:
        return RECORD_UNITS[name]
    if name in NOTE_UNITS:
        return NOTE_UNITS[name]
    for suffix, unit in _SUFFIX_UNITS:
        if name.endswith(suffix):
            return unit
    if "bytes" in name.split("_"):          # small_bytes_since_cycle
        return "bytes"
    if source == "stat" or isinstance(value, (bool, int)):
        return "count"
    return ""


def _warn(message: str) -> None:
    """A UserWarning attributed to the first caller outside heaplab (the
    notebook cell's line, the user's script): a fixed stacklevel pointed
    into heaplab when the same function was reached another way."""
    import sys
    import warnings
    f, level = sys._getframe(1), 2
    while f is not None and str(f.f_globals.get("__name__", "")).startswith("heaplab."):
        f, level = f.f_back, level + 1
    warnings.warn(message, UserWarning, stacklevel=level)


#: within one call of the analysis (report() reads each arm a dozen times:
#: arms, records_frame, every plot), each arm's figures are named once
_SAID: "contextvars.ContextVar[Optional[set]]" = contextvars.ContextVar("heaplab_said",
                                                                        default=None)


def _says_once(fn: Callable[..., Any]) -> Callable[..., Any]:
    """fn, with the arms' non-finite figures named once per outermost call."""
    @functools.wraps(fn)
    def call(*args: Any, **kw: Any) -> Any:
        if _SAID.get() is not None:
            return fn(*args, **kw)
        token = _SAID.set(set())
        try:
            return fn(*args, **kw)
        finally:
            _SAID.reset(token)
    return call


# ---- sources --------------------------------------------------------------------------

def _file_of(folder: str, data: Dict[str, Any]) -> str:
    """The *.json file under folder that holds data (to name it in an error)."""
    for root, dirs, files in os.walk(folder, followlinks=True):
        dirs.sort()
        for name in sorted(files):
            if name.endswith(".json"):
                path = os.path.join(root, name)
                try:
                    with open(path) as f:
                        if json.load(f) == data:
                            return path
                except (OSError, ValueError):
                    continue
    return folder


@_says_once
def arms(source: Any) -> List[Dict[str, Any]]:
    """The arm JSON dicts of a source (see the module docstring), in order.
    An arm that cannot be read -- no 'experiment', 'records' not a list,
    series rows that are not [t_s, phys, rss, lazyfree] -- is a ValueError
    naming its file (or the arm, for one given as a dict)."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            found = load_arms(path)
            for a in found:
                why = _arm_problem(a)
                if why:
                    raise ValueError(f"{_file_of(path, a)}: not an arm's results: {why}")
            for a in found:
                if _non_finite(a):
                    _say_non_finite(lambda a=a: _file_of(path, a), a)
            # os.walk visits experiment folders in no set order: E1, E2, ..., E10
            found.sort(key=lambda a: _natural(a["experiment"]))
            if not found:
                raise ValueError(_no_arm_results(path))
            return found
        if os.path.isfile(path):
            with open(path) as f:
                try:
                    data = json.load(f)
                except ValueError as e:
                    raise ValueError(f"{path}: not JSON ({e})") from None
            if isinstance(data, dict) and "records" in data and "arm" in data:
                why = _arm_problem(data)
                if why:
                    raise ValueError(f"{path}: not an arm's results: {why}")
                if _non_finite(data):
                    _say_non_finite(lambda: path, data)
            return arms(data)
        raise ValueError(f"{path}: no such file or folder")
    data = getattr(source, "data", None)           # an ArmResult
    if isinstance(data, dict):
        reps = getattr(source, "repeats", None) or []
        if len(reps) > 1:
            # Experiment.run(repeat=N): the N runs, each tagged repeat=k --
            # what its saved <arm>.r<k>.json files give -- not the median
            # record (its figures are medians; it has no series or phase
            # times of its own: median_arm)
            return [{**a, "repeat": a.get("repeat", k)}
                    for k, r in enumerate(reps) for a in arms(getattr(r, "data", r))]
        return arms(data)
    if isinstance(source, dict):
        if "records" in source and "arm" in source:
            why = _arm_problem(source)
            if why:
                raise ValueError(f"arm {source.get('arm')!r}: not an arm's results: {why}")
            # (an arm given as a dict or an ArmResult was not checked: its
            # infinity a blank cell without a word, where the same arm read
            # from its file was named)
            if _non_finite(source):
                _say_non_finite(lambda: "an arm given in Python", source)
            return [source]
        if source and all(hasattr(v, "data") or isinstance(v, dict) for v in source.values()):
            return [a for v in source.values() for a in arms(v)]
        raise ValueError("a dict source must be an arm's JSON (with 'arm' and 'records') "
                         f"or {{arm: ArmResult}}; got keys {sorted(source)[:8]}")
    if isinstance(source, (list, tuple)):
        return [a for item in source for a in arms(item)]
    raise TypeError(f"cannot read results from {type(source).__name__}: expected a results "
                    "folder, an arm JSON file, an ArmResult, {arm: ArmResult} or an arm dict")


def _not_finite(name: str, v: Any) -> bool:
    """A number that is no measurement: an infinity anywhere, a NaN in a
    figure, a stat or an effect (the harness writes null for a figure a
    phase does not have, a counter is never NaN) -- but not a NaN note: a
    note may mean "no value" by it (_json_note allows it)."""
    return (isinstance(v, float) and not math.isfinite(v)
            and not (math.isnan(v) and name.startswith("notes.")))


def _non_finite(a: Dict[str, Any]) -> List[str]:
    """The figures, stats and notes of an arm's records (and a sweep task's
    effects) that are no finite number (_not_finite: JSON's Infinity or
    NaN -- a hand edit, another tool's record): each
    'record i (phase p): name = inf'."""
    found = []
    for i, r in enumerate(a["records"]):
        for k, v in (*((k, r.get(k)) for k in (*FIGURES, "samples")),
                     *((f"stats.{n}", v) for n, v in (r.get("stats") or {}).items()),
                     *((f"notes.{n}", v) for n, v in (r.get("notes") or {}).items()
                       if n not in NOTE_NOT_FIGURES)):
            if _not_finite(k, v):
                found.append(f"record {i} (phase {r['phase']!r}): {k} = {v}")
    for e in a.get("effects_numeric") or []:
        if isinstance(e, dict) and _not_finite("effect", e.get("value")):
            found.append(f"effect {e.get('effect')!r} = {e.get('value')}")
    return found


def _say_non_finite(where: Callable[[], str], a: Dict[str, Any]) -> None:
    """A warning naming an arm's non-finite figures (where(): its file, or
    how it was given): no number, they have no row (a blank cell in the
    tables); said once per arm within one call (_says_once), whichever way
    the arm came in (a folder, a file, a dict, an ArmResult, a sweep's task
    record)."""
    bad = _non_finite(a)
    sw = a.get("sweep") if isinstance(a.get("sweep"), dict) else {}
    key = (a.get("experiment"), a.get("arm"), a.get("repeat"), sw.get("cell"),
           sw.get("repeat"), tuple(bad))
    said = _SAID.get()
    if said is not None:
        if key in said:
            return
        said.add(key)
    _warn(f"heaplab: {where()} ({a['experiment']}/{a['arm']}"
                  + (f" cell {sw['cell']}" if sw.get("cell") else "")
                  + f"): {len(bad)} figure(s) not a finite number -- {'; '.join(bad[:4])}"
                  + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
                  + ": not a measurement, left out of the tables (a blank cell)")


def _natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name))]


@_says_once
def experiments(source: Any) -> List[str]:
    """The experiment names in a source, in order of first appearance."""
    return list(dict.fromkeys(a["experiment"] for a in arms(source)))


def _select(source, experiment=None, arm_names=None):
    """The arms of one experiment (the only one, or the named one)."""
    if isinstance(arm_names, str):
        arm_names = [arm_names]
    if arm_names is not None and len(arm_names) == 0:
        raise ValueError("arms=[]: name at least one arm (or arms=None for all)")
    found = arms(source)
    names = list(dict.fromkeys(a["experiment"] for a in found))
    if experiment is None:
        if len(names) != 1:
            raise ValueError(f"these results hold experiments {names}: name one with experiment=")
        experiment = names[0]
    sel = [a for a in found if a["experiment"] == experiment]
    if not sel:
        raise ValueError(f"no arms of experiment {experiment!r} (experiments here: {names})")
    if arm_names is not None:
        by_name = {a["arm"]: a for a in sel}
        missing = [n for n in arm_names if n not in by_name]
        if missing:
            raise ValueError(f"experiment {experiment}: no arm(s) {missing} "
                             f"(arms: {list(by_name)})")
        sel = [by_name[n] for n in arm_names]
    return experiment, sel


# ---- failed phases -----------------------------------------------------------------------

#: what records_frame & co. do with the records of failed phases
FAILED_MODES = ("raise", "flag", "drop")


def failure(arm: Dict[str, Any], record: Dict[str, Any]) -> Optional[str]:
    """Why a phase record is no measurement, or None: its phase raised
    ('raised: ExcType: message', the record's status), or its arm failed
    ('arm failed: <the arm's error on one line>': the arm's JSON has an
    error -- it raised later, timed out, was interrupted, or its command
    failed)."""
    status = phase_status(record)
    if status != "ok":
        return status
    if arm.get("error"):
        return "arm failed: " + error_summary(arm["error"])
    return None


def no_records_failure(arm: Dict[str, Any]) -> Optional[str]:
    """Why an arm that failed with no phase record at all is no measurement
    ('arm failed: <its error on one line> (no phase records)'), or None.
    records_frame(failed='flag') gives it one row (phase and figure empty,
    value NaN) whose status says this, so that a table is never silently
    short of an arm."""
    if arm.get("error") and not arm.get("records"):
        return "arm failed: " + error_summary(arm["error"]) + " (no phase records)"
    return None


def _check_failed(found, failed):
    """The arms of `found` as failed= asks: 'raise' (ValueError naming the
    failed phases), 'flag' (all kept; records_frame's status column says
    which failed), 'drop' (the records of failed phases left out)."""
    if failed not in FAILED_MODES:
        raise ValueError(f"failed={failed!r}: expected one of {', '.join(FAILED_MODES)}")
    bad = [(a, r, why) for a in found for r in a["records"]
           for why in [failure(a, r)] if why is not None]
    # an arm that failed before any phase recorded (its command exited, no
    # arm JSON; an import error): it has no record to be flagged by, and
    # vanished from every table, exit 0 (the analysis hunt, session 32)
    bad += [(a, None, no_records_failure(a)) for a in found if no_records_failure(a)]
    if failed == "raise" and bad:
        listed = "; ".join(f"{a['experiment']}/{a['arm']}"
                           + (f" phase {r['phase']!r}: " if r is not None else ": ") + why
                           for a, r, why in bad[:5])
        more = f" (and {len(bad) - 5} more)" if len(bad) > 5 else ""
        raise ValueError(f"{len(bad)} phase record(s) of failed phases or arms (or failed arms "
                         f"with none), no measurement: "
                         f"{listed}{more}; pass failed='flag' to keep them (the status column "
                         "says which) or failed='drop' to leave them out")
    if failed == "drop" and bad:
        out = []
        for a in found:
            keep = [r for r in a["records"] if failure(a, r) is None]
            if keep:
                out.append({**a, "records": keep})
        return out
    return found


# ---- repeats ----------------------------------------------------------------------------

_PHASE_KEYS = ["experiment", "arm", "repeat", "index", "phase"]


def _phase_rows(found):
    """(experiment, arm, repeat, index, phase) of every record of some arm dicts."""
    return pd.DataFrame([(a["experiment"], a["arm"], a.get("repeat"), r.get("index", pos),
                          r["phase"]) for a in found for pos, r in enumerate(a["records"])],
                        columns=_PHASE_KEYS)


@_says_once
def check_repeats_pair(source: Any) -> None:
    """ValueError when the repeats of an arm do not pair: phase k of each
    repeat goes with phase k of the others (the phase index), and phase k
    must have one name in every repeat -- the rule median_arm combines an
    ArmResult's repeats by (heaplab.harness.repeats_mismatch), and the one
    wide(), the phase-cost and VMA plots, the aligned footprint plot and
    report() take the saved <arm>.r<k>.json files by.  Repeats whose phase
    names differ at some position (one recorded 'small' before 'big') were
    median_arm's 'big' averaged with 'small', while wide() listed four rows
    (big, small, big, small).  `source` is a records_frame (or any frame
    with experiment, arm, repeat, index and phase columns) or a source."""
    rows = source if isinstance(source, pd.DataFrame) else _phase_rows(arms(source))
    if rows.empty or any(c not in rows.columns for c in _PHASE_KEYS):
        return
    ph = rows[_PHASE_KEYS].astype({"repeat": object}).fillna({"repeat": -1}).drop_duplicates()
    for (exp, arm), g in ph.groupby(["experiment", "arm"], sort=False):
        if g["repeat"].nunique() < 2:
            continue
        runs = [(int(k) if isinstance(k, float) and k.is_integer() else k,
                 dict(zip((int(i) for i in r["index"]), r["phase"])))
                for k, r in g.sort_values("index", kind="stable").groupby("repeat", sort=True)]
        why = repeats_mismatch(runs)
        if why:
            raise ValueError(f"{exp}/{arm}: its repeats recorded different phases ({why}); "
                             "repeats pair by position (phase k with phase k, as median_arm "
                             "combines them), so these cannot be combined -- read each "
                             "repeat's <arm>.r<k>.json on its own")


# ---- frames ---------------------------------------------------------------------------

_number = _real


@_says_once
def records_frame(source: Any, stats: bool = True, notes: bool = True,
                  derived: bool = True, failed: str = "raise") -> pd.DataFrame:
    """The tidy table: one row per experiment x arm x phase x figure.

    Columns: experiment, arm, repeat (k of a repeated arm's <arm>.r<k>.json;
    None for an arm run once), phase, index (the phase's position in its arm),
    figure, value (float, in `unit`), unit (bytes, MiB, MiB/s, s, ms, ns,
    count, ...), source (record: the harness's figures; derived: phys_growth,
    phys_peak_growth, phys_returned, resident_growth; stat: the heap's
    counters at the end of the phase, named stats.<counter>; note: the
    experiment's own numbers, named notes.<key> -- prefixed because a note
    often reuses a counter's name for a different figure, e.g. E2's
    notes.cycles counts the churn's cycles, stats.cycles every cycle so far).
    A figure the phase does not have (null, or not a number) has no row.

    status: 'ok', or why the phase is no measurement (failure(): its phase
    raised, or its arm failed).  failed='raise' (the default) refuses such
    records with a ValueError naming them, 'flag' keeps them (status says
    which), 'drop' leaves them out."""
    rows = []
    for a in _check_failed(arms(source), failed):
        gone = no_records_failure(a)
        if gone and failed == "flag":
            rows.append((a["experiment"], a["arm"], a.get("repeat"), "", -1, "", math.nan, "",
                         "arm", gone))
        for pos, r in enumerate(a["records"]):
            key = (r.get("experiment", a["experiment"]), r.get("arm", a["arm"]), a.get("repeat"),
                   r["phase"], r.get("index", pos))
            status = failure(a, r) or "ok"

            def add(figure, value, unit, src):
                if _number(value):
                    rows.append((*key, figure, float(value), unit, src, status))

            for f in (*FIGURES, "samples"):
                add(f, r.get(f), RECORD_UNITS[f], "record")
            if derived:
                # (median_arm's record: the median of each repeat's own figure)
                for name, v in derived_figures(r).items():
                    add(name, v, "bytes", "derived")
            if stats:
                for k, v in (r.get("stats") or {}).items():
                    add("stats." + k, v, unit_of(k, v, "stat"), "stat")
            if notes:
                for k, v in (r.get("notes") or {}).items():
                    if k not in NOTE_NOT_FIGURES:
                        add("notes." + k, v, unit_of(k, v, "note"), "note")
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.astype({"index": "int64", "value": "float64"})


def to_unit(df: pd.DataFrame, unit: str = "MiB") -> pd.DataFrame:
    """Rows in bytes converted to MiB (unit='MiB') or back (unit='bytes')."""
    out = df.copy()
    if unit == "MiB":
        sel = out["unit"] == "bytes"
        out.loc[sel, "value"] = out.loc[sel, "value"] / MiB
    elif unit == "bytes":
        sel = out["unit"] == "MiB"
        out.loc[sel, "value"] = out.loc[sel, "value"] * MiB
    else:
        raise ValueError(f"unit {unit!r}: expected 'MiB' or 'bytes'")
    out.loc[sel, "unit"] = unit
    return out


WIDE_FIGURES = ("phys_before", "phys_after", "phys_peak", "phys_low_after_mark", "phys_growth",
                "phys_returned", "resident_after", "vmas_after", "duration_s")


@_says_once
def wide(df: Any, figures: Optional[Sequence[str]] = WIDE_FIGURES,
         unit: Optional[str] = "MiB", failed: str = "raise") -> pd.DataFrame:
    """One row per experiment x arm x phase, one column per figure (bytes
    shown in MiB by default) -- the table a notebook shows.  Repeats of an
    arm are one row: each figure's median over them.  `df` is a
    records_frame (or a source, which is read first, with `failed` as
    records_frame takes it).  A frame that holds flagged records of failed
    phases is refused unless failed='flag' (they are shown, and a last
    column `status` says 'ok' or why a row is no measurement) or 'drop'."""
    if isinstance(figures, str):
        figures = (figures,)
    if figures is not None and not len(figures):
        # (it gave an empty table, where plot_phase_cost and plot_vmas refuse it)
        raise ValueError("figures=[]: name at least one figure (or figures=None for all)")
    if not isinstance(df, pd.DataFrame):
        df = records_frame(df, failed=failed)
    elif "status" in df.columns:
        if failed not in FAILED_MODES:
            raise ValueError(f"failed={failed!r}: expected one of {', '.join(FAILED_MODES)}")
        bad = df[df["status"] != "ok"]
        if len(bad) and failed == "raise":
            first = bad.drop_duplicates(["experiment", "arm", "phase"]).head(5)
            raise ValueError("records of failed phases or arms, no measurement: " + "; ".join(
                f"{e}/{a} phase {p!r}: {st}" for e, a, p, st in
                first[["experiment", "arm", "phase", "status"]].itertuples(index=False))
                + "; pass failed='flag' to show them or failed='drop' to leave them out")
        if failed == "drop":
            df = df[df["status"] == "ok"]
    # repeats are one row per phase index: only when their phase names agree
    check_repeats_pair(df)
    status = None
    if failed == "flag" and "status" in df.columns:
        # which rows are no measurement (report --failed flag's phases.csv
        # showed failed arms' figures unmarked): 'ok', or each failure of
        # the phase's records (repeats: every one that failed)
        status = df.groupby(["experiment", "arm", "index", "phase"], sort=False)["status"].agg(
            lambda v: "ok" if (v == "ok").all() else "; ".join(dict.fromkeys(x for x in v
                                                                          if x != "ok")))
    if unit is not None:
        df = to_unit(df, unit)
    if figures is not None:
        unknown = [f for f in figures if f not in set(df["figure"])]
        if unknown and tuple(figures) != WIDE_FIGURES:
            # (the default set may name figures a run does not have: a mark)
            raise ValueError(f"no figure(s) {unknown} in these records "
                             f"(figures: {sorted(set(df['figure']))})")
        figures = [f for f in figures if f not in unknown]
        df = df[df["figure"].isin(figures)]
    order = {a: i for i, a in enumerate(dict.fromkeys(df["arm"]))}
    # repeats of an arm (--repeat's <arm>.r<k>.json, a sweep's): the median,
    # as plot_phase_cost's bars (it was the first repeat's value)
    t = df.pivot_table(index=["experiment", "arm", "index", "phase"], columns="figure",
                       values="value", aggfunc="median", sort=False)
    t = t.reset_index()
    if status is not None:
        t = t.merge(status.rename("status").reset_index(), how="left",
                    on=["experiment", "arm", "index", "phase"])
    t["_arm"] = t["arm"].map(order)
    t = t.sort_values(["experiment", "_arm", "index"]).drop(columns=["_arm", "index"])
    cols = [f for f in (figures or t.columns) if f in t.columns and f not in
            ("experiment", "arm", "phase", "status")]
    if status is not None:
        cols.append("status")
    t = t.set_index(["experiment", "arm", "phase"])[cols]
    t.columns.name = None
    return t


@_says_once
def phases_frame(source: Any) -> pd.DataFrame:
    """One row per arm x phase: when it ran (seconds since the arm started),
    and its mark (label and time) if it set one."""
    rows = []
    for a in arms(source):
        for pos, r in enumerate(a["records"]):
            notes = r.get("notes") or {}
            rows.append((r.get("experiment", a["experiment"]), r.get("arm", a["arm"]),
                         r.get("index", pos), r["phase"], r.get("t_start_s"), r.get("t_end_s"),
                         r.get("duration_s"), notes.get("mark"), notes.get("mark_s")))
    return pd.DataFrame(rows, columns=PHASE_COLUMNS)


@_says_once
def series_frame(source: Any) -> pd.DataFrame:
    """The footprint time series: one row per sample -- experiment, arm, t_s
    (seconds since the arm started), phys, rss, lazyfree (bytes), and the
    phase the sample falls in (None between phases)."""
    frames = []
    for a in arms(source):
        s = a.get("series") or []
        f = pd.DataFrame(s, columns=["t_s", "phys", "rss", "lazyfree"])
        f.insert(0, "arm", a["arm"])
        f.insert(0, "experiment", a["experiment"])
        f["phase"] = _phase_of(f["t_s"].to_numpy(dtype=float), a["records"])
        frames.append(f)
    if not frames:
        return pd.DataFrame(columns=SERIES_COLUMNS)
    return pd.concat(frames, ignore_index=True)[SERIES_COLUMNS]


def _phase_of(t, records):
    out = np.full(len(t), None, dtype=object)
    for r in records:
        t0, t1 = r.get("t_start_s"), r.get("t_end_s")
        if t0 is None or t1 is None:
            continue
        out[(t >= t0) & (t <= t1)] = r["phase"]
    return out


# ---- plots ----------------------------------------------------------------------------

_SHADES = ("#4c72b0", "#dd8452")
# one colour per arm group (an off/on pair shares one: off dashed and lighter, on solid)
_ARM_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf")

# Human names of the figures, for axis labels (unit added from the frame).
FIGURE_LABELS = {
    "phys_before": "footprint when the phase began",
    "phys_after": "footprint when the phase ended",
    "phys_peak": "peak footprint in the phase",
    "phys_low": "lowest footprint in the phase",
    "phys_low_after_mark": "lowest footprint after the mark",
    "phys_growth": "footprint the phase left",
    "phys_peak_growth": "peak above the phase's start",
    "phys_returned": "footprint returned after the mark",
    "resident_after": "heap resident at the end (resident_bytes)",
    "resident_growth": "heap residency the phase left (resident_bytes)",
    "rss_after": "RSS when the phase ended",
    "vmas_after": "VMAs over the heap",
    "duration_s": "phase duration",
    "samples": "footprint samples",
}

_CONTROL = ("off",)
_TREATMENT = ("on",)


def figure_label(figure: str, unit: str = "") -> str:
    """A human axis label for a figure of records_frame: its name in words
    and the unit, e.g. 'footprint the phase left (MiB)'.  Notes and stats
    without an entry in FIGURE_LABELS are their name with spaces."""
    base = figure.split(".", 1)[1] if figure.startswith(("notes.", "stats.")) else figure
    text = FIGURE_LABELS.get(figure) or FIGURE_LABELS.get(base) or base.replace("_", " ")
    for suffix in ("_mib_s", "_bytes", "_mib", "_ms", "_ns", "_us", "_s", "_pct"):
        if base.endswith(suffix) and figure not in FIGURE_LABELS:
            text = base[: -len(suffix)].replace("_", " ")
            break
    if figure.startswith("stats."):
        text += " (counter)" if unit in ("", "count") else ""
    if unit == "fraction":
        unit = "share: 1 = all of it"
    return f"{text} ({unit})" if unit and unit != "count" else text


def arm_groups(names: Sequence[str]) -> Dict[str, Tuple[str, str]]:
    """Arms paired for the plots: {arm: (group, role)} where an arm named
    with an 'off' or 'on' token (off, on_512, lua-off, python/on) belongs
    to the group of its other tokens with role 'control' or 'treatment';
    any other arm is a group of its own (role '').  Groups keep the order
    of first appearance."""
    out = {}
    for name in names:
        tokens = re.split(r"([-_/])", str(name))
        role, rest = "", []
        for t in tokens:
            if t in _CONTROL and not role:
                role = "control"
            elif t in _TREATMENT and not role:
                role = "treatment"
            else:
                rest.append(t)
        group = "".join(rest).strip("-_/") if role else str(name)
        out[name] = (group or "", role)
    return out


def _paired_order(names):
    """Arm names reordered so each off/on pair sits together (control first)."""
    groups = arm_groups(names)
    order = list(dict.fromkeys(groups[n][0] for n in names))
    rank = {"control": 0, "": 1, "treatment": 2}
    return sorted(names, key=lambda n: (order.index(groups[n][0]), rank[groups[n][1]]))


def _styles(names):
    """{arm: dict(color, ls, alpha)}: a colour per group, off dashed."""
    groups = arm_groups(names)
    order = list(dict.fromkeys(groups[n][0] for n in names))
    out = {}
    for n in names:
        g, role = groups[n]
        colour = _ARM_COLOURS[order.index(g) % len(_ARM_COLOURS)]
        out[n] = {"color": colour, "ls": "--" if role == "control" else "-",
                  "alpha": 0.85 if role == "control" else 1.0}
    return out


def _by_arm(sel):
    """{arm name: [arm dicts, one per repeat]} in order of first appearance."""
    out = {}
    for a in sel:
        out.setdefault(a["arm"], []).append(a)
    return out


def mark_phases(ax: Any, phases: pd.DataFrame, labels: bool = True, marks: bool = True) -> None:
    """Mark phase boundaries on an axis whose x is seconds since the arm
    started: alternating shaded spans, a line at each boundary, the phase
    names along the top (staggered on two rows so short phases stay legible)
    and a dotted line at each phase's mark.  `phases` is phases_frame rows
    of ONE arm (or any rows with phase, t_start_s, t_end_s, mark_s)."""
    tr = ax.get_xaxis_transform()       # x in data, y in axes fraction
    rows = [r for r in phases.itertuples() if r.t_start_s is not None and r.t_end_s is not None
            and not (pd.isna(r.t_start_s) or pd.isna(r.t_end_s))]
    for i, r in enumerate(rows):
        ax.axvspan(r.t_start_s, r.t_end_s, color=_SHADES[i % 2], alpha=0.10, lw=0)
        ax.axvline(r.t_start_s, color="0.45", lw=0.7)
        if labels:
            ax.text((r.t_start_s + r.t_end_s) / 2, 0.97 if i % 2 == 0 else 0.87, r.phase,
                    transform=tr, ha="center", va="top", fontsize=8, clip_on=True,
                    bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
        mark_s = getattr(r, "mark_s", None)
        if marks and mark_s is not None and not pd.isna(mark_s):
            ax.axvline(mark_s, color="k", lw=0.9, ls=":")
    if rows:
        ax.axvline(rows[-1].t_end_s, color="0.45", lw=0.7)


def _mib_formatter(ax):
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:,.0f}")


def _slots(sel):
    """The aligned phase slots of some arms: [(index, name, start, width,
    mark offset or None)], where phase k of every arm starts at the same x
    and is as wide as the longest arm took for it."""
    check_repeats_pair(sel)
    width, names, mark = {}, {}, {}
    for a in sel:
        for pos, r in enumerate(a["records"]):
            k = r.get("index", pos)
            t0, t1 = r.get("t_start_s"), r.get("t_end_s")
            if t0 is None or t1 is None:
                continue
            width[k] = max(width.get(k, 0.0), t1 - t0)
            names.setdefault(k, []).append(r["phase"])
            m = (r.get("notes") or {}).get("mark_s")
            if m is not None:
                off = m - t0
                mark[k] = off if k not in mark else min(mark[k], off)
    out, x = [], 0.0
    for k in sorted(width):
        label = " / ".join(dict.fromkeys(names[k]))
        out.append((k, label, x, width[k], mark.get(k)))
        x += width[k]
    return out


def _aligned(a, slots):
    """One arm's series in aligned coordinates: [(x array, phys MiB array)]
    per phase (samples outside every phase -- before the first, between
    phases, after the last, when the heap is closed -- are left out)."""
    s = np.asarray(a.get("series") or [], dtype=float).reshape(-1, 4)
    start = {k: x for k, _, x, _, _ in slots}
    out = []
    for pos, r in enumerate(a["records"]):
        k = r.get("index", pos)
        t0, t1 = r.get("t_start_s"), r.get("t_end_s")
        if t0 is None or t1 is None or k not in start:
            continue
        sel = (s[:, 0] >= t0) & (s[:, 0] <= t1)
        xs = start[k] + (s[sel, 0] - t0)
        ys = s[sel, 1] / MiB
        # the phase's own before/after readings pin its ends
        if _number(r.get("phys_before")) and _number(r.get("phys_after")):
            xs = np.concatenate([[start[k]], xs, [start[k] + (t1 - t0)]])
            ys = np.concatenate([[r["phys_before"] / MiB], ys, [r["phys_after"] / MiB]])
        out.append((k, xs, ys, t1 - t0))
    return out


@_says_once
def plot_footprint(source: Any, experiment: Optional[str] = None,
                   arms: Optional[Sequence[str]] = None, overlay: bool = True, rss: bool = True,
                   sharey: bool = True, title: Optional[str] = None,
                   width: float = 10.0) -> Figure:
    """Footprint over time, every arm of the experiment on one axis.

    overlay=True (the default): one axis; the phases of every arm are
    aligned (phase k starts at the same x for every arm and is as wide as
    the slowest arm took; x is seconds since the phase began), shaded and
    named along the top, the mark dotted.  Arms of an off/on pair share a
    colour, off dashed.  Repeats of an arm (a sweep's or --repeat's records)
    are drawn as their median with the min-max band shaded, each repeat's
    phase stretched to the slot (aligned on the share of the phase done).  Samples
    outside the phases (after the arm closed its heap) are not drawn.

    overlay=False: one panel per arm on its own time axis (phys_footprint
    solid, rss dashed, lazyfree dash-dotted), the detail view.
    Returns a matplotlib Figure."""
    experiment, sel = _select(source, experiment, arms)
    if not overlay:
        return _plot_footprint_panels(sel, experiment, rss, sharey, title, width)
    from matplotlib.lines import Line2D

    groups = _by_arm(sel)
    names = _paired_order(list(groups))
    styles = _styles(names)
    slots = _slots(sel)
    failed = {a["arm"] for a in sel if a.get("error")}
    fig = Figure(figsize=(width, 4.8), layout="constrained")
    ax = fig.add_subplot()
    tr = ax.get_xaxis_transform()
    top = 1.0
    for i, (k, label, x0, w, mark) in enumerate(slots):
        ax.axvspan(x0, x0 + w, color=_SHADES[i % 2], alpha=0.10, lw=0)
        ax.axvline(x0, color="0.45", lw=0.7)
        ax.text(x0 + w / 2, 0.98 if i % 2 == 0 else 0.90, label, transform=tr, ha="center",
                va="top", fontsize=8, clip_on=True,
                bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
        if mark is not None:
            ax.axvline(x0 + mark, color="k", lw=0.9, ls=":")
    if slots:
        ax.axvline(slots[-1][2] + slots[-1][3], color="0.45", lw=0.7)
    handles = []
    slot_end = {s[0]: s[2] + s[3] for s in slots}
    for name in names:
        st = styles[name]
        reps = groups[name]
        per = [_aligned(a, slots) for a in reps]
        if len(reps) == 1:
            # a faint dotted line carries the arm's level to the end of a
            # slot its phase finished early in (it did not wait; the slot
            # is as long as the slowest arm's phase)
            for k, xs, ys, _ in per[0]:
                if len(xs) and slot_end[k] - xs[-1] > 1e-9:
                    ax.plot([xs[-1], slot_end[k]], [ys[-1], ys[-1]], color=st["color"],
                            ls=":", lw=0.8, alpha=0.4)
        for k, x0, _, _ in [(s[0], s[2], None, None) for s in slots]:
            parts = [next(((xs, ys, d) for kk, xs, ys, d in p if kk == k), None) for p in per]
            parts = [p for p in parts if p is not None and len(p[0])]
            if not parts:
                continue
            if len(parts) == 1:
                xs, ys, _ = parts[0]
                ax.plot(xs, ys, color=st["color"], ls=st["ls"], alpha=st["alpha"], lw=1.5)
                top = max(top, float(np.nanmax(ys)))
            else:
                longest = max(d for _, _, d in parts)
                grid = np.linspace(0.0, longest, 200)
                ys = np.full((len(parts), len(grid)), np.nan)
                for j, (xs, yv, d) in enumerate(parts):
                    # each repeat's phase stretched to the slot: the same
                    # share of the phase done, not the same second, so a
                    # shorter repeat does not end the band early
                    ys[j] = np.interp(grid * (d / longest if longest > 0 else 0), xs - x0, yv)
                lo, hi = np.nanmin(ys, axis=0), np.nanmax(ys, axis=0)
                med = np.nanmedian(ys, axis=0)
                ax.fill_between(x0 + grid, lo, hi, color=st["color"], alpha=0.18, lw=0)
                ax.plot(x0 + grid, med, color=st["color"], ls=st["ls"], alpha=st["alpha"], lw=1.5)
                top = max(top, float(np.nanmax(hi)))
        n = len(reps)
        label = name + (" (failed)" if name in failed else "")
        if n > 1:
            label += f" (median of {n}, band min-max)"
        handles.append(Line2D([], [], color=st["color"], ls=st["ls"], lw=1.5, label=label))
    if any(s[4] is not None for s in slots):
        handles.append(Line2D([], [], color="k", lw=0.9, ls=":", label="mark (lowest-after window)"))
    ax.set_ylim(0, top * 1.25)              # head room for the phase names
    _mib_formatter(ax)
    ax.grid(axis="y", alpha=0.3)
    ax.set_ylabel("memory charged to the process\n(phys_footprint, MiB)")
    ax.set_xlabel("seconds since the phase began (phases aligned across arms; "
                  "each as long as its slowest arm)" if len(slots) > 1 else
                  "seconds since the phase began")
    fig.legend(handles=handles, loc="outside right upper", fontsize=8)
    head = " ".join(x for x in (experiment, sel[0].get("title", "")) if x)
    fig.suptitle(title or f"{head}: footprint over time, arms overlaid")
    return fig


def _plot_footprint_panels(sel, experiment, rss, sharey, title, width):
    from matplotlib.lines import Line2D

    ser = series_frame(sel)
    ser = ser[ser["phase"].notna()]           # only samples inside a phase
    ph = phases_frame(sel)
    names = list(dict.fromkeys(a["arm"] for a in sel))
    failed = {a["arm"] for a in sel if a.get("error")}
    styles = _styles(names)
    head = " ".join(x for x in (experiment, sel[0].get("title", "")) if x)
    title = title or f"{head}: footprint over time"
    mark_handle = Line2D([], [], color="k", lw=0.9, ls=":", label="mark (lowest-after window)")
    fig = Figure(figsize=(width, 1.1 + 2.3 * len(names)), layout="constrained")
    axes = fig.subplots(len(names), 1, sharex=True, sharey=sharey, squeeze=False)[:, 0]
    for ax, name in zip(axes, names):
        s = ser[ser["arm"] == name]
        colour = styles[name]["color"]
        if len(s):
            ax.plot(s["t_s"], s["phys"] / MiB, color=colour, lw=1.6)
            if rss:
                ax.plot(s["t_s"], s["rss"] / MiB, color=colour, lw=0.9, ls="--", alpha=0.6)
            if (s["lazyfree"] > 0).any():
                ax.plot(s["t_s"], s["lazyfree"] / MiB, color="0.3", lw=0.9, ls="-.")
        else:
            ax.text(0.5, 0.5, "no samples", transform=ax.transAxes, ha="center")
        mark_phases(ax, ph[ph["arm"] == name].drop_duplicates("index"))
        label = name + (" (failed)" if name in failed else "")
        ax.set_ylabel(f"{label}\nMiB")
        if not sharey:
            _finish_axis(ax, s)
    if sharey:
        _finish_axis(axes[0], ser)
    for ax in axes:
        ax.grid(axis="y", alpha=0.3)
    handles = [Line2D([], [], color="0.2", lw=1.6, label="phys_footprint (memory charged)")]
    if rss:
        handles.append(Line2D([], [], color="0.2", lw=0.9, ls="--", alpha=0.6, label="RSS"))
    if (ser["lazyfree"] > 0).any():
        handles.append(Line2D([], [], color="0.3", lw=0.9, ls="-.", label="LazyFree"))
    if ph["mark_s"].notna().any():
        handles.append(mark_handle)
    fig.legend(handles=handles, loc="outside lower center", ncols=len(handles), fontsize=8,
               frameon=False)
    axes[-1].set_xlabel("seconds since the arm started")
    fig.suptitle(title)
    return fig


def _finish_axis(ax, ser):
    top = max(float(ser["phys"].max()) if len(ser) else 0.0,
              float(ser["rss"].max()) if len(ser) else 0.0) / MiB
    ax.set_ylim(0, max(top, 1.0) * 1.32)    # head room for the phase names
    _mib_formatter(ax)
    ax.grid(axis="y", alpha=0.3)


def _short(v):
    return "" if not math.isfinite(v) else f"{v:,.0f}" if abs(v) >= 10 else f"{v:.3g}"


def _phase_order(df):
    return list(dict.fromkeys(df.sort_values("index", kind="stable")["phase"]))


def _phase_slots(df):
    """(slot label per row of df, slot labels in order): a phase's name, or
    name#k for the k-th phase of that name in its arm when an arm has more
    than one (phases may repeat a name: two are two bars, not repeats of
    one).  Rows are told apart by their phase index, so repeats of an arm
    (the same index) share a slot -- when they agree on its name
    (check_repeats_pair); slots are ordered by index."""
    check_repeats_pair(df)
    keys = ["experiment", "arm", "repeat"] if "repeat" in df.columns else ["experiment", "arm"]
    ph = df[keys + ["index", "phase"]].astype({"repeat": object} if "repeat" in keys else {})
    ph = ph.fillna({"repeat": -1} if "repeat" in keys else {}).drop_duplicates()
    ph = ph.sort_values("index", kind="stable")
    ph["k"] = ph.groupby(keys + ["phase"], sort=False).cumcount() + 1
    repeated = set(ph.loc[ph["k"] > 1, "phase"])
    ph["slot"] = [f"{p}#{k}" if p in repeated else p for p, k in zip(ph["phase"], ph["k"])]
    slot_of = dict(zip(zip(*(ph[c] for c in keys + ["index"])), ph["slot"]))
    rows = df[keys + ["index"]].astype({"repeat": object} if "repeat" in keys else {})
    rows = rows.fillna({"repeat": -1} if "repeat" in keys else {})
    labels = pd.Series([slot_of[t] for t in zip(*(rows[c] for c in keys + ["index"]))],
                       index=df.index, dtype=object)
    first = ph.groupby("slot", sort=False)["index"].min().sort_values(kind="stable")
    return labels, list(first.index)


def _label_bars(ax, fig, bars, values, bar_width_data, fontsize=7):
    """Write each bar's value on it only where it fits: horizontally if the
    text is narrower than the bar, else turned upright if one line of text
    is, else not at all (the values are in the CSV and the table)."""
    x0, x1 = ax.get_xlim()
    axes_px = ax.get_position().width * fig.get_figwidth() * fig.dpi
    bar_px = axes_px * bar_width_data / max(x1 - x0, 1e-9)
    texts = [_short(v) for v in values]
    longest = max((len(t) for t in texts), default=0)
    char_px = fontsize * fig.dpi / 72 * 0.62
    if longest * char_px <= bar_px * 1.05:
        ax.bar_label(bars, labels=texts, fontsize=fontsize, padding=1)
    elif fontsize * fig.dpi / 72 * 1.1 <= bar_px:
        ax.bar_label(bars, labels=texts, fontsize=fontsize, padding=2, rotation=90)


@_says_once
def plot_phase_cost(source: Any, experiment: Optional[str] = None,
                    arms: Optional[Sequence[str]] = None,
                    figures: Union[str, Sequence[str]] = ("phys_growth", "duration_s"),
                    phases: Optional[Sequence[str]] = None, title: Optional[str] = None,
                    width: float = 10.0, failed: str = "raise") -> Figure:
    """Per-phase cost per arm: one panel per figure (default: the footprint
    the phase left, phys_growth, in MiB; and how long it took, in s),
    phases on x (all, or the ones named in `phases`), one bar per arm with
    off/on pairs side by side in one colour (off hatched).  Values are
    written on the bars where they fit.  Repeats of an arm: the bar is
    their median and the line through it spans min to max.  Any figure of
    records_frame works, e.g. "phys_peak_growth" or "notes.major_sweeps".
    failed: as records_frame's (records of failed phases or arms are
    refused by default).  Returns a matplotlib Figure."""
    if isinstance(figures, str):
        figures = (figures,)
    if not figures:
        raise ValueError("figures=[]: name at least one figure (one panel each)")
    if isinstance(phases, str):
        phases = (phases,)
    if phases is not None and not phases:
        raise ValueError("phases=[]: name at least one phase (or phases=None for all)")
    experiment, sel = _select(source, experiment, arms)
    df = to_unit(records_frame(sel, failed=failed), "MiB")
    names = _paired_order(list(_by_arm(sel)))
    styles = _styles(names)
    roles = arm_groups(names)
    unknown = [f for f in figures if f not in set(df["figure"])]
    if unknown:
        raise ValueError(f"experiment {experiment}: no figure(s) {unknown} in its records "
                         f"(figures: {sorted(set(df['figure']))})")
    # slots by the phase's index (two phases of an arm sharing a name were
    # taken for repeats: one bar, "median of 2")
    labels, order = _phase_slots(df)
    df = df.assign(slot=labels)
    if phases is not None:
        names_of = {sl: {sl, sl.split("#")[0]} for sl in order}
        missing = [p for p in phases if not any(p in v for v in names_of.values())]
        if missing:
            raise ValueError(f"experiment {experiment}: no phase(s) {missing} "
                             f"(phases: {order})")
        order = list(dict.fromkeys(sl for p in phases for sl in order if p in names_of[sl]))
    ticks = order
    single = len(order) == 1
    if single:
        # one phase: the arms are the categories, and the panels sit side by side
        fig = Figure(figsize=(width, 4.4), layout="constrained")
        axes = fig.subplots(1, len(figures), squeeze=False)[0, :]
    else:
        fig = Figure(figsize=(width, 0.9 + 3.1 * len(figures)), layout="constrained")
        axes = fig.subplots(len(figures), 1, squeeze=False)[:, 0]
    n = len(names)
    wbar = 0.8 / n
    any_repeats = False
    to_label = []
    for ax, fig_name in zip(axes, figures):
        d = df[df["figure"] == fig_name]
        unit = d["unit"].iloc[0]
        if unit in ("ns", "us"):            # counters in ns read better in ms
            d = d.assign(value=d["value"] / (1e6 if unit == "ns" else 1e3))
            unit = "ms"
        stats = d.groupby(["arm", "slot"])["value"].agg(["median", "min", "max", "count"])
        for i, name in enumerate(names):
            st = styles[name]
            hatch = "//" if roles[name][1] == "control" else None
            rows = stats.loc[name] if name in stats.index.get_level_values(0) else None
            keys = [order[0]] if single else order
            med = np.array([rows.loc[p, "median"] if rows is not None and p in rows.index
                            else np.nan for p in keys], dtype=float)
            lo = np.array([rows.loc[p, "min"] if rows is not None and p in rows.index
                           else np.nan for p in keys], dtype=float)
            hi = np.array([rows.loc[p, "max"] if rows is not None and p in rows.index
                           else np.nan for p in keys], dtype=float)
            cnt = int(rows["count"].max()) if rows is not None and len(rows) else 1
            x = np.array([i]) if single else np.arange(len(order)) + (i - (n - 1) / 2) * wbar
            w = 0.8 if single else wbar * 0.95
            bars = ax.bar(x, med, w, color=st["color"], alpha=0.55 if hatch else 0.9,
                          hatch=hatch, edgecolor=st["color"], lw=0.6,
                          label=name + (f" (median of {cnt})" if cnt > 1 else ""))
            if cnt > 1:
                any_repeats = True
                ax.vlines(x, lo, hi, color="0.15", lw=1.0)
            to_label.append((ax, bars, med, w))
        if single:
            ax.set_xticks(np.arange(n), names, fontsize=8, rotation=30 if n > 3 else 0)
            ax.set_xlabel(f"arm (phase {ticks[0]})", fontsize=9)
        else:
            ax.set_xticks(np.arange(len(order)), ticks, fontsize=9)
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_ylabel(figure_label(fig_name, unit), fontsize=9)
        ax.margins(y=0.18)
        ax.grid(axis="y", alpha=0.3)
    for ax, bars, values, w in to_label:
        _label_bars(ax, fig, bars, values, w)
    spread = " (bars: median, lines: min-max of the repeats)" if any_repeats else ""
    fig.suptitle(title or f"{experiment}: cost per phase and arm{spread}")
    if not single:
        # below the panels: "outside upper center" put the legend on the
        # suptitle (constrained layout gives both the same band at the top)
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncols=min(n, 6), fontsize=8,
                   frameon=False)
    return fig


#: plot_vmas: lines of its legend per column (beyond, another column)
LEGEND_ROWS = 20


@_says_once
def plot_vmas(source: Any, experiment: Optional[str] = None,
              arms: Optional[Sequence[str]] = None,
              figures: Union[str, Sequence[str]] = ("vmas_after",), log: Optional[bool] = None,
              title: Optional[str] = None, width: float = 10.0) -> Figure:
    """VMA counts per round: one line per arm (and per figure: solid, dashed,
    dotted), phases that have the figure on x; the last value is in the
    legend.  An off/on pair shares a colour; with one figure the control
    (off) is dashed, with several (the line style is then the figure's) its
    markers are hollow and its line thinner.  The default figure is the harness's vmas_after (VMAs over the
    heap's reservation when the phase ended); an experiment that counts VMAs
    mid-phase names its notes, e.g. figures=("notes.vmas_after_release",
    "notes.vmas_after_reuse") for E5.  log=None picks a log scale when the
    counts span 20x or more (hundreds with dump_toggle against 1 without).
    Repeats: the median per phase.  Returns a matplotlib Figure."""
    if isinstance(figures, str):
        figures = (figures,)
    if not figures:
        raise ValueError("figures=[]: name at least one figure")
    experiment, sel = _select(source, experiment, arms)
    df = records_frame(sel, stats=False)
    check_repeats_pair(df)
    d = df[df["figure"].isin(figures)]
    if d.empty:
        raise ValueError(f"experiment {experiment}: no phase recorded {list(figures)} "
                         "(the harness counts VMAs for a phase given heap=)")
    names = _paired_order(list(dict.fromkeys(a["arm"] for a in sel)))
    styles = _styles(names)
    order = _phase_order(d)
    # the legend outside the axes, on the right, in columns of at most
    # LEGEND_ROWS lines: E10's 40 arms inside the axes covered the plot
    # and ran off the figure (constrained layout gave up, its warning
    # printed among the report's lines)
    lines = len(names) * len(figures)
    ncols = -(-lines // LEGEND_ROWS)
    rows = -(-lines // ncols)
    fig = Figure(figsize=(width + (2.6 * ncols if lines > 4 else 0), max(4.2, 1.4 + 0.17 * rows)),
                 layout="constrained")
    ax = fig.add_subplot()
    markers = ("o", "s", "^", "D")
    roles = arm_groups(names)
    for name in names:
        # the control of a pair (off): dashed with one figure; with several
        # the line style is the figure's, so hollow markers and a thinner line
        # tell it from its treatment (they shared colour, marker and style)
        control = roles[name][1] == "control"
        for j, fig_name in enumerate(figures):
            v = d[(d["arm"] == name) & (d["figure"] == fig_name)]
            if v.empty:
                continue
            v = v.groupby(["index", "phase"], sort=True)["value"].median().reset_index()
            xs = [order.index(p) for p in v["phase"]]
            what = "" if len(figures) == 1 else ": " + figure_label(fig_name)
            label = f"{name}{what} (last {v['value'].iloc[-1]:,.0f})"
            several = len(figures) > 1
            ax.plot(xs, v["value"], marker=markers[j % len(markers)],
                    lw=1.0 if control and several else 1.5,
                    ls=("-", "--", ":", "-.")[j % 4] if several else styles[name]["ls"],
                    mfc="white" if control and several else styles[name]["color"],
                    mew=1.2, label=label, color=styles[name]["color"])
    lo, hi = d["value"].min(), d["value"].max()
    if log is None:
        log = lo > 0 and hi / lo >= 20
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:,.0f}")
    else:
        ax.set_ylim(bottom=0, top=max(hi, 1) * 1.15)
    ax.set_xticks(range(len(order)), order, fontsize=9)
    ax.set_xlim(-0.3, len(order) - 0.7)
    ax.set_ylabel("VMAs over the heap's reservation" + (" (log scale)" if log else ""))
    ax.set_xlabel("phase (round)")
    ax.grid(alpha=0.3)
    if lines > 4:
        # beside the axes (inside, it hid the lines it names), in columns
        fig.legend(*ax.get_legend_handles_labels(), loc="outside right upper", ncols=ncols,
                   fontsize=7, frameon=False)
    else:
        ax.legend(fontsize=8)
    fig.suptitle(title or f"{experiment}: VMA count per round")
    return fig


# ---- report ---------------------------------------------------------------------------

_GLYPH_MISSING = re.compile(r"^Glyph (\d+) .*missing from font\(s\) (.*?)\.?$")


def _render_png(fig, dpi):
    """(fig as PNG bytes, the characters of its text no font it asked for
    has, those fonts' names); matplotlib's other warnings are passed on."""
    import io
    import warnings
    buf = io.BytesIO()
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")     # (each time: its registry said them once)
        # (matplotlib's "constrained_layout not applied because axes sizes
        # collapsed to zero" leaked among heaplab report's lines: the
        # figure is saved as laid out without it)
        warnings.filterwarnings("ignore", message="constrained_layout not applied")
        fig.savefig(buf, dpi=dpi, format="png")
    missing: Dict[str, None] = {}
    fonts: Dict[str, None] = {}
    for w in got:
        m = _GLYPH_MISSING.match(str(w.message))
        if m:
            missing[chr(int(m.group(1)))] = None
            fonts.update((f.strip(), None) for f in m.group(2).split(","))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return buf.getvalue(), "".join(missing), list(fonts)


@functools.lru_cache(maxsize=None)
def _charmap(fname: str) -> frozenset:
    from matplotlib import ft2font
    try:
        return frozenset(ft2font.FT2Font(fname).get_charmap())
    except Exception:       # (a font file FreeType cannot read)
        return frozenset()


def _fonts_having(chars: str, besides: Sequence[str]) -> List[str]:
    """Names of installed fonts (matplotlib's font list) that have the
    characters, one font per character at most, none of `besides` (the
    fonts that lack them) -- nor matplotlib's "Last Resort", whose glyphs
    are the boxes."""
    from matplotlib import font_manager
    entries = sorted((f for f in font_manager.fontManager.ttflist
                      if f.name not in besides and not f.name.startswith("Last Resort")),
                     key=lambda f: (f.style != "normal", f.weight not in (400, "normal"),
                                    f.name))
    names: Dict[str, None] = {}
    for c in chars:
        for f in entries:
            if ord(c) in _charmap(f.fname):
                names[f.name] = None
                break
    return list(names)


def _scripts(chars: str) -> str:
    """'CJK (内存), Hangul (메)': the characters by the script their Unicode
    name begins with."""
    import unicodedata
    by: Dict[str, str] = {}
    for c in chars:
        word = unicodedata.name(c, "U+%04X" % ord(c)).split()[0]
        word = word if word.isupper() and len(word) <= 3 else word.capitalize()
        by[word] = by.get(word, "") + c
    return ", ".join(f"{k} ({v!r:.40})" for k, v in by.items())


def _save_figure(fig, path, dpi):
    """fig as a PNG at path, written whole (write_atomic): an interrupt or a
    full disk leaves the old file, never half of one.  Text in a script the
    figure's font lacks (an arm named in CJK: DejaVu Sans has none of it)
    is drawn with an installed font that has it, when there is one
    (matplotlib's font fallback); else one warning names the figure and
    the characters by script -- matplotlib's "Glyph N (...) missing from
    font(s) DejaVu Sans" was said once per character and draw, each a
    `heaplab report: warning:` line."""
    from matplotlib.text import Text
    png, missing, fonts = _render_png(fig, dpi)
    if missing:
        extra = _fonts_having(missing, fonts)
        if extra:
            for t in fig.findobj(Text):
                t.set_fontfamily([*t.get_fontfamily(), *extra])
            png, missing, _ = _render_png(fig, dpi)
    if missing:
        _warn(f"heaplab: {path}: {len(missing)} character(s) of its text are in no installed "
              f"font: {_scripts(missing)}, drawn as boxes -- install a font that has them "
              f"(for CJK: Debian's fonts-noto-cjk) and report again")
    write_atomic(path, png)


def _save_csv(frame, path, **kw):
    """frame as CSV (UTF-8, as DataFrame.to_csv writes it) at path, written
    whole (write_atomic)."""
    write_atomic(path, frame.to_csv(**kw).encode("utf-8"))


def _make_out(out):
    """The report's output folder, made if missing (ValueError when it cannot be)."""
    out = os.fspath(out)
    _make_folder(out, out, role=REPORT_OUT_ROLE)


#: the file a report keeps in its output folder while it is written: a
#: report that completes removes it, so one stopped part-way (an error, a
#: full disk, Ctrl-C, a kill) is recognisable later from the folder alone
INCOMPLETE_MARKER = "INCOMPLETE-REPORT.txt"


_MARKER_ID = re.compile(r"^\(report (\d+)-([0-9a-f]+)(?: on (.*): boot (\S*), pid namespace "
                        r"(\S*), process start (\S*))?\)$", re.M)


def _marker_entries(path: str) -> List[Tuple[int, str, str]]:
    """The reports an incomplete-report marker names: [(pid, id, its text)],
    in order (a marker of an older heaplab, no id line: one entry, pid 0)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    out, start = [], 0
    for m in _MARKER_ID.finditer(text):
        out.append((int(m.group(1)), f"{m.group(1)}-{m.group(2)}",
                    text[start:m.end()].strip("\n") + "\n"))
        start = m.end()
    if not out and text.strip():
        out.append((0, "", text))
    return out


def _alive(pid: int) -> bool:
    """A process of that id runs on this machine (a report still writing)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True         # (another user's: it exists)
    return True


def _read_proc(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def _process_start(pid: int) -> str:
    """The start time of process pid (/proc/PID/stat's starttime, clock
    ticks since boot: with the pid, it names one process of this boot), ''
    when there is no such process (or no /proc)."""
    fields = _proc_stat(pid)         # (field 3 on: starttime is field 22)
    return fields[19].decode() if fields and len(fields) > 19 else ""


def _this_machine() -> Tuple[str, str, str]:
    """(host name, boot id, pid namespace) of this process: where a pid in
    a marker entry can be looked up -- on the machine and boot that wrote
    it, in its pid namespace."""
    import socket
    try:
        ns = os.readlink("/proc/self/ns/pid")
    except OSError:
        ns = ""
    return (socket.gethostname(), _read_proc("/proc/sys/kernel/random/boot_id"),
            "".join(c for c in ns if c.isdigit()))


def _marker_identity() -> str:
    """The end of this process's id line: ' on HOST: boot B, pid namespace
    N, process start T' (_entry_state reads it)."""
    host, boot, ns = _this_machine()
    return (f" on {host}: boot {boot or '-'}, pid namespace {ns or '-'}, "
            f"process start {_process_start(os.getpid()) or '-'}")


def _entry_state(pid: int, text: str) -> Tuple[str, str]:
    """(state, where) of a marker entry's report: 'running' (still writing),
    'gone' (stopped: its entry can go) or 'elsewhere' (on another machine,
    or in another pid namespace -- a container --, whose processes this one
    cannot see: it may be running), with where that is.  The pid alone
    (os.kill(pid, 0)) took an entry written on another host (a shared
    folder) for gone when no process here had its pid, and for running
    when one had; and a pid reused since, by any process, kept the entry
    of a report long stopped.  An entry of an older heaplab (pid only) is
    judged by its pid."""
    m = None
    for m in _MARKER_ID.finditer(text):
        pass
    if pid <= 0:
        return "gone", ""
    if m is None or m.group(3) is None:
        return ("running" if pid != os.getpid() and _alive(pid) else "gone"), ""
    host, boot, ns, start = (m.group(3), m.group(4).strip("-"), m.group(5).strip("-"),
                             m.group(6).strip("-"))
    here_host, here_boot, here_ns = _this_machine()
    if boot and here_boot and boot != here_boot:
        # (another machine, or this one rebooted since: its processes are gone)
        return ("gone", "") if host == here_host else ("elsewhere", f"on host {host}")
    if not (boot and here_boot) and host != here_host:
        return "elsewhere", f"on host {host}"
    if ns and here_ns and ns != here_ns:
        return "elsewhere", f"in another pid namespace of this machine ({ns}: a container)"
    if pid == os.getpid():
        return "gone", ""       # (an earlier report of this process, stopped)
    now = _process_start(pid)
    if start and now:
        return ("running" if now == start else "gone"), ""     # (a pid reused: gone)
    return ("running" if _alive(pid) else "gone"), ""


class _Marker:
    """A report's INCOMPLETE-REPORT.txt entry in its folder: written just
    before the report's first file (begin) and taken out when it completes
    (end).  A report stopped before its first file changed nothing in the
    folder, and leaves no marker (it left one beside a complete earlier
    report).  The file holds one entry per report writing there: two
    reports into one folder at once each take out only their own -- the
    first to finish removed the other's -- and a report that completes
    also takes out the entries of reports no longer running (stopped:
    its files replace theirs); the file goes with the last entry.  An
    entry names its report's process as one process of one machine: pid,
    host, boot id, pid namespace and the process's start time
    (_entry_state) -- a pid reused since is no report running, and an
    entry written on another host or in another container, whose
    processes cannot be seen from here, is kept and said.  Entries are
    read and written under a lock on the folder (flock)."""

    def __init__(self, out: str, source: Any, again: str, say: Callable[[str], None]) -> None:
        import secrets
        import time
        self.out, self.path = out, os.path.join(out, INCOMPLETE_MARKER)
        self.id = f"{os.getpid()}-{secrets.token_hex(4)}"
        self.written = False
        src = (os.fspath(source) if isinstance(source, (str, os.PathLike))
               else "(results given in Python)")
        self.text = (
            f"This report is incomplete: `heaplab report` of {src} into this folder, started "
            f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')} (pid {os.getpid()}), did not finish -- it "
            f"was stopped by an error, a full disk, Ctrl-C or a kill (or it is still running).\n"
            f"Some of its files may be missing, and files here may be an earlier report's.\n"
            f"Run `{again}` again: a report that completes removes this file.\n"
            f"(report {self.id}{_marker_identity()})\n")
        entries = _marker_entries(self.path)
        states = [(pid, text, *_entry_state(pid, text)) for pid, _, text in entries]
        if any(state == "gone" for _, _, state, _ in states):
            say(f"{out}: an earlier report here did not complete ({INCOMPLETE_MARKER}); "
                f"this one replaces it")
        for pid, text, state, where in states:
            # (two reports into one folder at once: their files mixed, nothing said)
            what = text.splitlines()[0].split(" into this folder")[0].split(": ", 1)[-1]
            if state == "running":
                say(f"{out}: another report is writing into this folder now (pid {pid}: "
                    f"{what}): the files here will be a mix of both reports; let it finish, "
                    f"or report into another --out")
            elif state == "elsewhere":
                say(f"{out}: a report {where} (pid {pid}: {what}) did not complete or is "
                    f"still writing into this folder -- this machine cannot tell: if it "
                    f"runs, the files here will be a mix of both reports; its entry in "
                    f"{INCOMPLETE_MARKER} is kept (remove the file if that report is not "
                    f"running)")

    def _update(self, change: Callable[[List[Tuple[int, str, str]]],
                                       List[Tuple[int, str, str]]]) -> None:
        import fcntl
        fd = os.open(self.out, os.O_RDONLY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            entries = change(_marker_entries(self.path))
            if entries:
                write_atomic(self.path, "\n".join(t for _, _, t in entries))
            elif os.path.lexists(self.path):
                os.unlink(self.path)
        finally:
            os.close(fd)        # (the lock with it)

    def begin(self) -> None:
        """Before each file of the report: the first time, its entry."""
        if not self.written:
            self._update(lambda es: [e for e in es if e[1] != self.id]
                         + [(os.getpid(), self.id, self.text)])
            self.written = True

    def end(self) -> None:
        """The report is complete: its entry goes, and those of reports no
        longer running (its files replace theirs)."""
        self._update(lambda es: [e for e in es if e[1] != self.id
                                 and _entry_state(e[0], e[2])[0] != "gone"])


def _again(kind: str, source: Any, out: str, dpi: int, failed: str = "raise") -> str:
    """The command that writes the report whole, with the options given."""
    import shlex
    src = (shlex.quote(os.fspath(source)) if isinstance(source, (str, os.PathLike))
           else "(results given in Python)")
    return (f"python3 -m heaplab report {src} --out {shlex.quote(out)}"
            + (f" --dpi {dpi}" if dpi != 110 else "")
            + (f" --failed {failed}" if kind == "results" and failed != "raise" else ""))


def _safe(name):
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in str(name))


def _say_sessions(exp: str, sel: Sequence[Dict[str, Any]]) -> None:
    """A warning when an experiment's arms come from more than one session
    (an interrupted or -k session's arms saved over some of an older
    session's): its plots and tables put them side by side as one run's,
    and nothing said so (each arm JSON records its session; records.csv has
    the column, the report read none of it).  Arms that record no session
    (an older heaplab's) count as one more session beside others."""
    groups: Dict[Any, Tuple[Any, List[str]]] = {}
    for a in sel:
        sess = a.get("session") if isinstance(a.get("session"), dict) else {}
        sid = sess.get("id")
        label = a["arm"] + (f".r{a['repeat']}" if a.get("repeat") is not None else "")
        groups.setdefault(sid, (sess.get("started"), []))[1].append(label)
    if len(groups) < 2:
        return
    said = "; ".join(
        (f"session {sid} (started {started})" if sid is not None
         else "no session recorded (an older heaplab)")
        + f": {', '.join(sorted(arms)[:6])}" + (f" and {len(arms) - 6} more" if len(arms) > 6
                                                 else "")
        for sid, (started, arms) in sorted(groups.items(), key=lambda g: str(g[1][0])))
    _warn(f"heaplab: {exp}: its arms come from {len(groups)} sessions -- {said}: "
                  f"compared as one run's (an interrupted or partial session's arms beside an "
                  f"older one's); run the experiment again whole for one session's records")


@_says_once
def report(source: Any, out: Optional[str] = None, dpi: int = 110,
           log: Optional[Callable[[str], None]] = None, failed: str = "raise") -> List[str]:
    """Write the plots and tables for every experiment in `source`:

        <out>/<experiment>_footprint.png    plot_footprint
        <out>/<experiment>_phase_cost.png   plot_phase_cost
        <out>/<experiment>_vmas.png         plot_vmas, when some phase saw more than one VMA
        <out>/<experiment>_records.csv      records_frame (tidy)
        <out>/<experiment>_phases.csv       wide (MiB)

    An experiment whose records have no footprint (no series, no phys_*
    figure: the benchmark's results/bench, make bench's) gets its records CSV
    only, and a line saying why.

    `out` defaults to <source>/report when source is a folder.  Returns the
    paths written; `log(message)` is told about each (and about skipped plots).
    failed: as records_frame's -- records of failed phases or arms (and
    an arm that failed with no phase record) are refused by default
    (ValueError naming them, before anything is written); 'flag' keeps them
    (the records CSV's status column and the phase-cost plot include them;
    an arm with no phase record is named, and has a row in the records CSV),
    'drop' leaves them out of the tables and plots
    (the footprint plot shows every arm's series either way)."""
    if isinstance(source, (str, os.PathLike)):
        # the folder resolved once: RESULTS/latest re-pointed by a sweep
        # starting meanwhile sent the later reads and writes to another run
        source = os.path.realpath(os.fspath(source))
    if out is None:
        if not isinstance(source, (str, os.PathLike)):
            raise ValueError("report: name an output folder (out=) for results not read from disk")
        out = os.path.join(os.fspath(source), "report")
    out = os.path.realpath(os.fspath(out))
    say = log or (lambda msg: None)
    # read and check the results before the output folder is made: a
    # missing results folder made <missing>/report, then said "no arm
    # results in this folder"; refused records left an empty --out
    found = arms(source)
    _check_failed(found, failed)       # refuse before writing anything
    check_repeats_pair(_phase_rows(found))
    _make_out(out)
    marker = _Marker(out, source, _again("results", source, out, dpi, failed), say)
    written = []
    if isinstance(source, (str, os.PathLike)) and os.path.isdir(source):
        # a sweep's run folder in it (heaplab run --results RESULTS) is no
        # part of the suite's records (load_arms leaves it out): say so
        runs = sweep_runs_under(os.fspath(source))
        if runs:
            say(_runs_left_out(runs))

    def save_fig(fig, name):
        path = os.path.join(out, name)
        marker.begin()
        _save_figure(fig, path, dpi)
        written.append(path)
        say(f"wrote {path}")

    def save_csv(frame, name, **kw):
        path = os.path.join(out, name)
        marker.begin()
        _save_csv(frame, path, **kw)
        written.append(path)
        say(f"wrote {path}")

    for exp in experiments(found):
        _, sel = _select(found, exp)
        base = _safe(exp)
        _say_sessions(exp, sel)
        df = records_frame(sel, failed=failed)
        for a in sel:
            if not a["records"] and not a.get("error"):
                # (an arm that ran and recorded no phase -- no error, so no
                # failure to flag -- had no row in any table or bar, and the
                # report said nothing: E1's tables of on and off, a third arm
                # gone without a word)
                say(f"{exp}/{a['arm']}" + (f".r{a['repeat']}" if a.get("repeat") is not None
                                           else "")
                    + ": no phase record (the arm recorded no phase): no row in the tables, "
                      "no bar")
        if not any(a.get("series") for a in sel) and not df["figure"].isin(
                ("phys_before", "phys_after", "phys_peak")).any():
            # records without a footprint: make bench's results/bench (one record per
            # run, a time and a peak RSS) beside make experiments' -- it wrote an empty
            # footprint plot, then failed on the phase-cost plot ("no figure(s)
            # ['phys_growth']") and the report stopped there
            save_csv(df, f"{base}_records.csv", index=False)
            say(f"{exp}: no footprint in its records (" + (
                "the benchmark's: its table is bench/table.txt, its plots "
                "docs/notebooks/bench.ipynb" if exp == "bench" else
                "no series, no phys_* figure") + "); no footprint, phase-cost or VMA plot")
            continue
        for (arm_name, phase), st in (df[df["status"] != "ok"]
                                      .drop_duplicates(["arm", "phase"])
                                      .set_index(["arm", "phase"])["status"].items()):
            say(f"{exp}/{arm_name}" + (f" phase {phase!r}" if phase else "")
                + f": {st} (kept, failed='flag')")
        if failed == "drop":
            for a in sel:
                if no_records_failure(a):
                    say(f"{exp}/{a['arm']}: {no_records_failure(a)} (left out, failed='drop')")
        save_csv(df, f"{base}_records.csv", index=False)
        save_csv(wide(df, failed=failed), f"{base}_phases.csv")
        save_fig(plot_footprint(sel), f"{base}_footprint.png")
        if df.empty:
            say(f"{exp}: no phase records left (failed={failed!r}); no phase-cost plot")
        else:
            figs = _cost_figures(set(df["figure"]), exp, say)
            if figs:
                save_fig(plot_phase_cost(sel, failed=failed, figures=figs),
                         f"{base}_phase_cost.png")
        # (a VMA plot shows a count that changes within a run: a heap with
        # dump_unused=0, the launchers', is two VMAs throughout -- E8's flat
        # line; arms flat at different counts -- E10's collected heaps at 1,
        # its launchers' at 2 -- are no change either: the report drew 40 flat
        # lines, the notebooks hunt, session 32)
        rows = df[df["figure"] == "vmas_after"]
        vmas = rows["value"]
        changes = len(vmas) and bool(
            (rows.groupby(["arm", "repeat"], dropna=False)["value"].nunique() > 1).any())
        if changes:
            save_fig(plot_vmas(sel), f"{base}_vmas.png")
        elif len(vmas):
            flat = sorted({f"{v:.0f}" for v in vmas.dropna()}, key=float)
            say(f"{exp}: the heap's VMA count did not change within a run "
                f"({' or '.join(flat)} throughout); no VMA plot")
        else:
            say(f"{exp}: no VMA count recorded; no VMA plot")
    _say_stale(out, written)
    marker.end()
    return written


def _cost_figures(present: set, exp: str, say: Callable[[str], None]) -> List[str]:
    """The phase-cost plot's figures (phys_growth, duration_s) of those
    recorded, the others said: an arm JSON of a --command arm or another
    tool with footprints and no duration_s stopped the report part-way at
    the plot ("no figure(s) ['duration_s'] ...; run heaplab report
    again", which stopped there again)."""
    figs = [f for f in ("phys_growth", "duration_s") if f in present]
    lacking = [f for f in ("phys_growth", "duration_s") if f not in present]
    if lacking:
        say(f"{exp}: no {' or '.join(lacking)} in its records; "
            + (f"the phase-cost plot shows {figs[0]} alone" if figs else "no phase-cost plot"))
    return figs


#: the names report() writes (<experiment>_<what>)
REPORT_SUFFIXES = ("_footprint.png", "_phase_cost.png", "_vmas.png", "_records.csv",
                   "_phases.csv")


def _say_stale(out: str, written: Sequence[str]) -> None:
    """A warning naming the files of an earlier report in `out` that this
    one did not write (an experiment since removed from the results, a VMA
    plot no longer drawn): they sat beside the new ones as if part of it."""
    now = {os.path.basename(p) for p in written}
    stale = sorted(n for n in os.listdir(out)
                   if n.endswith(REPORT_SUFFIXES) and n not in now
                   and os.path.isfile(os.path.join(out, n)))
    if stale:
        _warn(f"heaplab: {out} holds {len(stale)} file(s) of an earlier report that "
                      f"this one did not write: {', '.join(stale[:8])}"
                      + (f" and {len(stale) - 8} more" if len(stale) > 8 else "")
                      + "; not part of this report -- remove them")


# ---- sweeps (heaplab run) ---------------------------------------------------------------

SWEEP_FIGURES = ("phys_before", "phys_after", "phys_peak", "phys_low_after_mark", "rss_peak",
                 "resident_before", "resident_after", "vmas_after", "duration_s")
# every derived figure, from the one definition (it listed three by hand and
# had no resident_growth, which records_frame and median_arm give)
SWEEP_DERIVED = tuple(DERIVED_FIGURES)   # (derived_figures)


def is_run_folder(path: Any) -> bool:
    """True when `path` is a sweep's run folder (it holds meta.json)."""
    return os.path.isfile(os.path.join(os.fspath(path), "meta.json"))


def run_meta(run: Any) -> Dict[str, Any]:
    """A run folder's meta.json as a dict (ValueError if it is not one)."""
    from .sweep import RUN_META, SweepError, load_meta
    try:
        meta = load_meta(os.fspath(run))
    except SweepError as e:
        raise ValueError(str(e)) from None
    # (another tool's meta.json -- no grid -- made every cell one cell of
    # no option: compare printed two rows of one cell, each called the other)
    for key, kind in (("run_id", str), ("grid", dict)):
        if not isinstance(meta.get(key), kind):
            raise ValueError(f"{os.path.join(os.fspath(run), RUN_META)}: not the meta.json of a "
                             f"heaplab run: {key!r} is {meta.get(key)!r:.60}, expected "
                             f"{'a string' if kind is str else 'an object'}")
    return meta


def _task_record_problem(data: Any) -> Optional[str]:
    """What keeps JSON from being a sweep's task record, or None."""
    if not isinstance(data, dict):
        return f"a JSON {type(data).__name__}, not an object"
    sw = data.get("sweep")
    if not isinstance(sw, dict):
        return "no 'sweep' object (what heaplab run writes beside the arm's JSON)"
    for key, kind in (("experiment", str), ("cell", str), ("arm", str), ("status", str),
                      ("repeat", int), ("values", dict)):
        if not isinstance(sw.get(key), kind):
            return f"sweep[{key!r}] is {sw.get(key)!r:.60}, expected {kind.__name__}"
    why = _arm_problem({"experiment": sw["experiment"], "arm": sw["arm"], **data})
    return why


@_says_once
def run_records(run: Any, skipped: Optional[List[Tuple[str, str]]] = None
                ) -> List[Dict[str, Any]]:
    """Every task record of a run folder (complete or failed), in task order.

    A record file that cannot be read or is not JSON raises ValueError
    naming it, as load_arms does; with a list as `skipped` each such file is
    appended to it as (path, reason) and left out, and a warning names it."""
    run = os.fspath(run)
    meta = run_meta(run)
    cells = meta.get("cells") if isinstance(meta.get("cells"), dict) else None
    seen: Dict[Tuple[Any, ...], str] = {}
    out = []
    for path in sorted(glob.glob(os.path.join(run, "*", "*", "*.r*.json"))):
        data = load_json_record(path, skipped, "run_records")
        if data is SKIPPED:
            continue
        # (JSON that is no task record was passed over without a word, or
        # was a TypeError / KeyError from inside the report and compare)
        why = _task_record_problem(data)
        if not why and cells is not None:
            # a record of another run's cell (another grid, a copy from
            # elsewhere) was read with this cell's values: its effects in
            # this cell's medians, its missing option a NaN cell
            sw = data["sweep"]
            if sw["cell"] not in cells:
                why = (f"cell {sw['cell']!r} is no cell of the run (meta.json's cells: "
                       f"{', '.join(sorted(cells))})")
            elif sw["values"] != cells[sw["cell"]]:
                why = (f"its values {sw['values']} are not cell {sw['cell']}'s "
                       f"{cells[sw['cell']]} (meta.json): a record of another run")
        if why:
            if skipped is None:
                raise ValueError(f"{path}: not a task record of the run: {why}; remove it, or "
                                 f"pass skipped=[] to run_records to load the others")
            _warn(f"heaplab: {path}: not a task record of the run: {why}: skipped")
            skipped.append((path, why))
            continue
        sw = data["sweep"]
        if _non_finite({"experiment": sw["experiment"], "arm": sw["arm"], **data}):
            # (a task's Infinity was sweep.csv's "inf", its effect's median
            # inf; only the suite's arm files were checked)
            _say_non_finite(lambda: path, {"experiment": sw["experiment"], "arm": sw["arm"],
                                           **data})
        key = (sw["experiment"], sw["cell"], sw["arm"], sw["repeat"])
        if key in seen:
            # (a copy beside it, `on.r0 (1).json`, was one more repeat in
            # every median, without a word: load_arms names such copies)
            _warn(f"heaplab: {path} and {seen[key]} are both experiment {key[0]} cell "
                          f"{key[1]} arm {key[2]!r} repeat {key[3]}: read as two runs of the "
                          f"task; remove the one that is not wanted")
        else:
            seen[key] = path
        out.append(data)
    if not out:
        raise ValueError(f"{run}: no task records yet (run {meta.get('run_id')})")
    return out


@_says_once
def sweep_frame(run: Any) -> pd.DataFrame:
    """A run folder as one tidy DataFrame: one row per cell x arm x repeat x
    phase, with the swept option values as columns (named as in --set), then
    experiment, cell, arm, repeat, status (the task's), worker, error,
    phase, index, phase_status ('ok', or 'raised: ...' when the phase's
    with block raised: its figures are no measurement), and the phase's
    figures (bytes, except duration_s in s and vmas_after a count)
    with the derived figures (DERIVED: phys_growth, phys_peak_growth,
    phys_returned, resident_growth; None where the record has not both
    parts).  A failed task has one row with phase None and its error."""
    meta = run_meta(run)
    names = list(meta.get("grid") or {})
    rows = []
    for data in run_records(run):
        sw = data["sweep"]
        base = {n: _grid_value(sw["values"].get(n)) for n in names}
        base.update({"experiment": data.get("experiment", sw["experiment"]), "cell": sw["cell"],
                     "arm": sw["arm"], "repeat": sw["repeat"], "status": sw["status"],
                     "worker": sw.get("worker"), "error": sw.get("error")})
        recs = data.get("records") or []
        if not recs:
            rows.append({**base, "phase": None, "index": -1})
        for pos, r in enumerate(recs):
            row = {**base, "phase": r["phase"], "index": r.get("index", pos),
                   "phase_status": phase_status(r)}
            for f in SWEEP_FIGURES:
                # (a non-finite figure: a blank cell, as records_frame has no
                # row for it -- run_records named it; it was sweep.csv's inf)
                row[f] = r.get(f) if _real(r.get(f)) else None
            own = derived_figures(r)
            for name in SWEEP_DERIVED:
                row[name] = own.get(name)
            rows.append(row)
    cols = names + ["experiment", "cell", "arm", "repeat", "status", "worker", "error", "phase",
                    "index", "phase_status", *SWEEP_FIGURES, *SWEEP_DERIVED]
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values(["cell", "arm", "repeat", "index"], kind="stable").reset_index(drop=True)


def _grid_value(v):
    """A grid value as a number when it is one (64, 0.5), else the string (16k)."""
    if v is None:
        return None
    try:
        return int(v)
    except (TypeError, ValueError):
        try:
            return float(v)
        except (TypeError, ValueError):
            return v


@_says_once
def effects_frame(run: Any) -> pd.DataFrame:
    """The run's effects as numbers: one row per cell x arm x repeat x
    effect -- option values, experiment, cell, arm, repeat, effect, value,
    unit, threshold, passed, status (the task's)."""
    meta = run_meta(run)
    names = list(meta.get("grid") or {})
    rows = []
    for data in run_records(run):
        sw = data["sweep"]
        base = {n: _grid_value(sw["values"].get(n)) for n in names}
        base.update({"experiment": data.get("experiment", sw["experiment"]), "cell": sw["cell"],
                     "arm": sw["arm"], "repeat": sw["repeat"], "status": sw["status"]})
        for e in data.get("effects_numeric") or []:
            if e.get("value") is None or _not_finite("effect", e.get("value")):
                continue        # (run_records named a non-finite one)
            rows.append({**base, "effect": e["effect"], "value": float(e["value"]),
                         "unit": e.get("unit", ""), "threshold": e.get("threshold"),
                         "passed": e.get("passed")})
    cols = names + ["experiment", "cell", "arm", "repeat", "status", "effect", "value", "unit",
                    "threshold", "passed"]
    return pd.DataFrame(rows, columns=cols)


@_says_once
def effect_summary(run: Any) -> pd.DataFrame:
    """Per experiment x cell x arm x effect (ok tasks only): the median
    across repeats, min, max, spread (max - min), n, and the option values."""
    df = effects_frame(run)
    df = df[df["status"] == "ok"]
    meta = run_meta(run)
    names = list(meta.get("grid") or {})
    keys = ["experiment", "cell", "arm", "effect", "unit"]
    g = df.groupby(keys, sort=False)["value"]
    out = g.agg(median="median", min="min", max="max", n="count").reset_index()
    out["spread"] = out["max"] - out["min"]
    if names:
        vals = df.drop_duplicates("cell").set_index("cell")[names]
        out = out.join(vals, on="cell")
    return out[names + keys + ["median", "min", "max", "spread", "n"]]


def option_value(name: str, v: Any, known: Optional[Mapping[str, Any]] = None) -> Any:
    """A swept option's value as heaplab reads it (16k == 16384 == "16384",
    false == 0): what cells are matched (compare_runs), sorted and labelled
    by (plot_effect, plot_effect_heatmap).  An option that is not heaplab's
    (a variable in capitals) is a number when it reads as one, else as given.
    `known`: heaplab.options(), when the caller has it."""
    if known is None:
        import heaplab
        known = heaplab.options()
    if name in known and v is not None and not (isinstance(v, float) and v != v):
        from .harness import arm_option
        try:
            return arm_option({"sweep": {"env": {"HEAPLAB_" + name.upper(): str(v)}}}, name)
        except (ValueError, KeyError):
            return v
    return _grid_value(v) if isinstance(v, str) else v


def _cell_key(v: Any) -> Tuple[int, Any]:
    """A sort key for option values of mixed kinds: numbers by value, then
    anything else as text (64 vs '16k' was a TypeError)."""
    if isinstance(v, (bool, int, float)) and not (isinstance(v, float) and v != v):
        return (0, float(v))
    return (1, str(v))


def _canon_cells(s: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """s with its swept option columns as option_value() reads them."""
    import heaplab
    known = heaplab.options()
    s = s.copy()
    for n in names:
        if n in s.columns:
            s[n] = pd.Series([option_value(n, v, known) for v in s[n]], index=s.index,
                             dtype=object)
    return s


@_says_once
def compare_runs(run_a: Any, run_b: Any, tolerance: float = 0.02) -> pd.DataFrame:
    """Per effect, the medians of two runs side by side: one row per
    experiment x arm x effect x option values present in both runs, with
    median_a, median_b, ratio (b / a), spread (the larger of the two runs'
    max - min across repeats) and `significant`: the medians differ by more
    than that spread and by more than `tolerance` of the larger median
    (relative; a floor, so that two runs of near-identical repeats do not
    call a 0.1% difference real; near zero the floor is `tolerance` itself
    for fractions and 1 MiB for MiB figures).  Cells are matched on their option values,
    not their ids, so runs with different grids compare where they meet.

    An option swept in one run only has, in the other, the value that run
    gave every task: its --env HEAPLAB_<NAME> (meta.json's env), else
    heaplab's default -- so a cell meets the other run only where the
    swept value is that one (it was matched with every cell of the other
    run).  A variable in capitals swept in one run only must be in the
    other's --env, else ValueError (its value there is not recorded).
    Option values are compared as heaplab reads them (16k == 16384, false
    == 0).  ValueError when no cell meets, or when both name one folder (a
    run against itself differs nowhere).  A UserWarning says when the two
    runs' --env differ (the effects may differ for that reason)."""
    if (isinstance(run_a, (str, os.PathLike)) and isinstance(run_b, (str, os.PathLike))
            and os.path.realpath(run_a) == os.path.realpath(run_b)):
        raise ValueError(f"{os.fspath(run_a)} and {os.fspath(run_b)} are the same run folder "
                         f"({os.path.realpath(run_a)}): name two runs")
    from .harness import arm_option
    import heaplab
    known = heaplab.options()
    a, b = effect_summary(run_a), effect_summary(run_b)
    not_names = ("experiment", "cell", "arm", "effect", "unit", "median", "min", "max",
                 "spread", "n")
    names_a = [c for c in a.columns if c not in not_names]
    names_b = [c for c in b.columns if c not in not_names]
    metas = {"A": run_meta(run_a), "B": run_meta(run_b)}
    envs = {k: m.get("env") for k, m in metas.items()}

    def canon(name: str, v: Any) -> Any:
        return option_value(name, v, known)

    def value_in(which: str, name: str) -> Any:
        env = envs[which] or {}
        var = name if name.isupper() else "HEAPLAB_" + name.upper()
        if var in env:
            return canon(name, env[var])
        if name in known:
            return arm_option({}, name)
        raise ValueError(f"{name} is swept in run {'B' if which == 'A' else 'A'} only, and run "
                         f"{which} recorded no value of it (not in its --env): its cells cannot "
                         f"be matched")

    for frame, own, which in ((a, names_a, "A"), (b, names_b, "B")):
        for n in own:
            frame[n] = [canon(n, v) for v in frame[n]]
    for n in names_a:
        if n not in names_b:
            b[n] = value_in("B", n)
    for n in names_b:
        if n not in names_a:
            a[n] = value_in("A", n)
    names = names_a + [n for n in names_b if n not in names_a]
    if envs["A"] is not None and envs["B"] is not None and envs["A"] != envs["B"]:
        differ = sorted(set(envs["A"]) ^ set(envs["B"]) |
                        {k for k in envs["A"] if k in envs["B"] and envs["A"][k] != envs["B"][k]})
        _warn(f"the two runs ran with different --env ({', '.join(differ)}: A "
                      f"{ {k: envs['A'].get(k) for k in differ} }, B "
                      f"{ {k: envs['B'].get(k) for k in differ} }): a difference may be the "
                      f"environment's")
    for which, run in (("A", run_a), ("B", run_b)):
        # (failed tasks' effects are left out of the medians: a run whose
        # every task failed was "no effect in common", nothing more)
        line = _failed_tasks(run)
        if line:
            _warn(f"run {which} ({os.fspath(run)}): {line}")
    keys = ["experiment", "arm", "effect", "unit"] + names
    m = a.merge(b, on=keys, suffixes=("_a", "_b"))
    if m.empty:
        raise ValueError("the two runs have no effect in common (same experiment, arm and "
                         "option values)")
    m["ratio"] = m["median_b"] / m["median_a"].where(m["median_a"] != 0)
    m["spread"] = m[["spread_a", "spread_b"]].max(axis=1)
    diff = (m["median_b"] - m["median_a"]).abs()
    floor = tolerance * m[["median_a", "median_b"]].abs().max(axis=1)
    # near zero a relative floor is no floor: fractions get `tolerance`
    # itself (2 points by default), MiB figures 1 MiB
    floor = floor.where(m["unit"] != "fraction", floor.clip(lower=tolerance))
    floor = floor.where(m["unit"] != "MiB", floor.clip(lower=1.0))
    m["significant"] = (diff > m["spread"]) & (diff > floor)
    return m[keys + ["median_a", "median_b", "ratio", "spread", "n_a", "n_b", "significant"]]


@_says_once
def plot_effect(run: Any, effect: str, experiment: Optional[str] = None, x: Optional[str] = None,
                title: Optional[str] = None, width: float = 10.0) -> Figure:
    """One effect of a sweep: its median per cell and arm (points joined by
    arm, off/on pairs in one colour, off dashed) with the min-max range of
    the repeats as error bars; x is a swept option (the first by default),
    the other options' combinations are separate lines.  Returns a Figure."""
    s = effect_summary(run)
    s = s[s["effect"] == effect]
    if experiment is not None:
        s = s[s["experiment"] == experiment]
    if s.empty:
        raise ValueError(f"no effect {effect!r} in this run (effects: "
                         f"{sorted(set(effect_summary(run)['effect']))})")
    names = list(run_meta(run).get("grid") or {})
    x = x or (names[0] if names else None)
    # cells sorted and labelled by the option's value as heaplab reads it:
    # 128k,16k,65536 sorted as text, or a TypeError (int vs str) in the sort
    s = _canon_cells(s, names)
    ticks = sorted(dict.fromkeys(s[x]), key=_cell_key) if x else ["(one cell)"]
    pos = {v: i for i, v in enumerate(ticks)}
    fig = Figure(figsize=(width, 4.4), layout="constrained")
    ax = fig.add_subplot()
    arm_names = _paired_order(list(dict.fromkeys(s["arm"])))
    styles = _styles(arm_names)
    others = [n for n in names if n != x]
    markers = ("o", "s", "^", "D", "v", "P", "X")
    # one line per arm x combination of the other options: with more
    # combinations than markers (a 50 x 20 grid: 20 lines of one arm) the
    # lines shared colour and marker, and legend entries 1, 8 and 15 were one
    # and the same to the eye -- one arm's lines get a colour each then
    combos = list(dict.fromkeys(tuple(r) for r in s[others].itertuples(index=False))) \
        if others else [()]
    cmap = None
    if len(arm_names) == 1 and len(combos) > 1:
        from matplotlib import colormaps
        cmap = colormaps["tab20" if len(combos) <= 20 else "viridis"]
    lines = 0
    for arm_name in arm_names:
        d = s[s["arm"] == arm_name]
        groups = d.groupby(others, sort=False) if others else [((), d)]
        for j, (key, g) in enumerate(groups):
            key = key if isinstance(key, tuple) else (key,)
            lines += 1
            colour = styles[arm_name]["color"]
            if cmap is not None:
                c = combos.index(key) if key in combos else j
                colour = cmap(c % 20 if len(combos) <= 20 else c / max(len(combos) - 1, 1))
            if x:
                g = g.iloc[sorted(range(len(g)), key=lambda i: _cell_key(g[x].iloc[i]))]
            xs = [pos[v] for v in g[x]] if x else [0] * len(g)
            med = g["median"].to_numpy(dtype=float)
            err = np.vstack([med - g["min"].to_numpy(dtype=float),
                             g["max"].to_numpy(dtype=float) - med])
            label = arm_name + ("" if not others else " " + ", ".join(
                f"{n}={v}" for n, v in zip(others, key)))
            ax.errorbar(xs, med, yerr=err, color=colour,
                        ls=styles[arm_name]["ls"], marker=markers[j % len(markers)], capsize=3,
                        lw=1.3, label=label)
    # (50 values of x: their labels ran into one another, "9101112")
    ax.set_xticks(range(len(ticks)), [str(v) for v in ticks],
                  rotation=90 if len(ticks) > 15 else 0, fontsize=8 if len(ticks) > 15 else None)
    unit = s["unit"].iloc[0]
    ax.set_ylabel(figure_label(effect, unit))
    ax.set_xlabel(x or "")
    ax.grid(alpha=0.3)
    n = int(s["n"].max())
    # the legend in columns of LEGEND_ROWS lines (as plot_vmas': 40 lines ran
    # off the figure)
    fig.legend(loc="outside right upper", fontsize=8, ncols=-(-lines // LEGEND_ROWS))
    fig.suptitle(title or f"{s['experiment'].iloc[0]}: {effect.replace('_', ' ')} per cell "
                          f"(median of {n} repeats, bars min-max)")
    return fig


def _median_range(med: float, lo: float, hi: float) -> str:
    """'median\n(min–max)' with the decimals the spread needs to be seen
    (20.4 (19.6–20.7) for repeats 19.55..20.71: it was '20 ±0.58', half the
    spread around a rounded median); the median alone when there is no spread."""
    spread = hi - lo
    if not spread > 0:
        return _short(med)
    d = min(6, max(0, 1 - math.floor(math.log10(spread))))
    return f"{med:,.{d}f}\n({lo:,.{d}f}–{hi:,.{d}f})"


@_says_once
def plot_effect_heatmap(run: Any, effect: str, arm: str, x: Optional[str] = None,
                        y: Optional[str] = None, experiment: Optional[str] = None,
                        title: Optional[str] = None, width: float = 7.0) -> Figure:
    """A heat map of one effect's median over two swept options (the first
    two by default) for one arm; each cell is annotated with its median and
    the min-max of its repeats, "median (min–max)", with the decimals the
    spread needs.  Returns a Figure."""
    s = effect_summary(run)
    s = s[(s["effect"] == effect) & (s["arm"] == arm)]
    if experiment is not None:
        s = s[s["experiment"] == experiment]
    names = list(run_meta(run).get("grid") or {})
    if len(names) < 2:
        raise ValueError("a heat map needs two swept options (--set twice)")
    x, y = x or names[0], y or names[1]
    if s.empty:
        raise ValueError(f"no effect {effect!r} for arm {arm!r} in this run")
    rest = [n for n in names if n not in (x, y)]
    # rows and columns sorted and labelled by the option's value as heaplab
    # reads it (128k,16k,64k sorted as text)
    s = _canon_cells(s, names)
    if rest:      # other options: the median over them
        s = s.groupby([x, y], sort=False)["median"].median().reset_index().assign(spread=np.nan)
    rows = sorted(dict.fromkeys(s[y]), key=_cell_key)
    cols = sorted(dict.fromkeys(s[x]), key=_cell_key)
    t = s.pivot_table(index=y, columns=x, values="median", aggfunc="median",
                      sort=False).reindex(index=rows, columns=cols)
    lo_t = (s.pivot_table(index=y, columns=x, values="min", aggfunc="min", sort=False)
            .reindex(index=rows, columns=cols).to_numpy(dtype=float) if not rest else None)
    hi_t = (s.pivot_table(index=y, columns=x, values="max", aggfunc="max", sort=False)
            .reindex(index=rows, columns=cols).to_numpy(dtype=float) if not rest else None)
    vals = t.to_numpy(dtype=float)
    lo, hi = np.nanmin(vals), np.nanmax(vals)
    texts = {}
    for i in range(len(t.index)):
        for j in range(len(t.columns)):
            v = vals[i, j]
            if not math.isfinite(v):
                continue
            text = _short(v)
            if lo_t is not None and math.isfinite(lo_t[i, j]) and math.isfinite(hi_t[i, j]):
                text = _median_range(v, lo_t[i, j], hi_t[i, j])
            texts[i, j] = text
    # a column as wide as its longest text (fontsize 8: about 0.07 in a
    # character), the figure up to HEATMAP_MAX_WIDTH; where the texts do
    # not fit even then, none is written (a 50 x 20 grid's were one smear of
    # overlapping digits on a 7-inch figure, its tick labels too)
    chars = max((len(line) for text in texts.values() for line in text.split("\n")),
                default=1)
    need = 1.6 + len(t.columns) * (chars * 0.07 + 0.1)
    fig_w = min(max(width, need), max(width, HEATMAP_MAX_WIDTH))
    label = need <= fig_w
    fig = Figure(figsize=(fig_w, 0.9 + 0.55 * len(t.index) + 1.5), layout="constrained")
    ax = fig.add_subplot()
    im = ax.imshow(vals, aspect="auto", cmap="viridis")
    crowded = (fig_w - 1.6) / max(len(t.columns), 1) < 0.3
    ax.set_xticks(range(len(t.columns)), [str(c) for c in t.columns],
                  rotation=90 if crowded else 0, fontsize=8 if crowded else None)
    ax.set_yticks(range(len(t.index)), [str(i) for i in t.index])
    ax.set_xlabel(x)
    ax.set_ylabel(y)
    for (i, j), text in texts.items() if label else ():
        v = vals[i, j]
        dark = hi > lo and (v - lo) / (hi - lo) < 0.5
        ax.text(j, i, text, ha="center", va="center", fontsize=8,
                color="white" if dark else "black")
    unit = s["unit"].iloc[0] if "unit" in s else ""
    fig.colorbar(im, ax=ax, label=figure_label(effect, unit))
    fig.suptitle(title or f"{effect.replace('_', ' ')}, arm {arm}: median over repeats"
                 + (f" (and over {', '.join(rest)})" if rest else "")
                 + ("" if label or not texts else
                    f"\n({len(t.columns)} columns: too many to write each cell's value on it; "
                    f"the values are in effect_summary)"))
    return fig


#: plot_effect_heatmap's widest figure (inches) before it leaves the cells unlabelled
HEATMAP_MAX_WIDTH = 24.0


def _failed_tasks(run: Any) -> str:
    """'' when every task record of the run is ok, else the line saying
    how many failed ("3 of 8 task(s) failed: E1 cell c000 on r1, ...")."""
    recs = run_records(run)
    bad = [r["sweep"] for r in recs if r["sweep"]["status"] != "ok"]
    if not bad:
        return ""
    named = ", ".join(f"{sw['experiment']} cell {sw['cell']} {sw['arm']} r{sw['repeat']}"
                      for sw in bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
    return (f"{len(bad)} of {len(recs)} task(s) failed ({named}): their effects are no part "
            f"of the medians (sweep.csv's status and error say why; heaplab run --resume "
            f"{os.fspath(run)} runs them again)")


@_says_once
def report_run(run: Any, out: Optional[str] = None, dpi: int = 110,
               log: Optional[Callable[[str], None]] = None) -> List[str]:
    """The report of a sweep's run folder: per effect a median/spread plot
    (<experiment>_<effect>.png), per effect and arm a heat map over the
    first two swept options (<experiment>_<effect>_<arm>_heatmap.png), the
    footprint and phase-cost plots of every arm over all its repeats (first
    cell), and the tidy tables sweep.csv, effects.csv, effect_summary.csv.
    Returns the paths written."""
    # the run folder (and out) resolved once: `heaplab report RESULTS/latest`
    # re-read the link on every read and write, so a sweep starting meanwhile
    # (it points latest at its new run) made it crash or write one run's
    # tables into the other's report/
    run = os.path.realpath(os.fspath(run))
    out = os.path.realpath(os.fspath(out) if out else os.path.join(run, "report"))
    say = log or (lambda msg: None)
    written = []
    # read the run first (a bad run folder is refused before anything is made)
    tables = (("sweep.csv", sweep_frame(run)), ("effects.csv", effects_frame(run)),
              ("effect_summary.csv", effect_summary(run)))
    _make_out(out)
    marker = _Marker(out, run, _again("run", run, out, dpi), say)

    def save(fig, name):
        path = os.path.join(out, name)
        marker.begin()
        _save_figure(fig, path, dpi)
        written.append(path)
        say(f"wrote {path}")

    for name, frame in tables:
        path = os.path.join(out, name)
        marker.begin()
        _save_csv(frame, path, index=False)
        written.append(path)
        say(f"wrote {path}")
    meta = run_meta(run)
    names = list(meta.get("grid") or {})
    # (a run whose tasks failed -- every one of them -- was reported as its
    # tables and exit 0, nothing said: the plots' medians over fewer
    # repeats, or no plot at all)
    failed_line = _failed_tasks(run)
    if failed_line:
        say(f"{os.path.basename(run)}: {failed_line}")
    s = effect_summary(run)
    for exp in dict.fromkeys(s["experiment"]):
        base = _safe(exp)
        for eff in dict.fromkeys(s[s["experiment"] == exp]["effect"]):
            save(plot_effect(run, eff, experiment=exp), f"{base}_{_safe(eff)}.png")
            if len(names) >= 2:
                for arm_name in dict.fromkeys(s[(s["experiment"] == exp) &
                                                (s["effect"] == eff)]["arm"]):
                    save(plot_effect_heatmap(run, eff, arm_name, experiment=exp),
                         f"{base}_{_safe(eff)}_{_safe(arm_name)}_heatmap.png")
    recs = [r for r in run_records(run) if r["sweep"]["status"] == "ok"]
    if recs:
        first = recs[0]["sweep"]["cell"]
        sel = [r for r in recs if r["sweep"]["cell"] == first]
        for exp in dict.fromkeys(r["experiment"] for r in sel):
            mine = [r for r in sel if r["experiment"] == exp]
            save(plot_footprint(mine, experiment=exp,
                                title=f"{exp}: footprint, cell {first} "
                                      f"{meta.get('cells', {}).get(first, {})}"),
                 f"{_safe(exp)}_{first}_footprint.png")
            # (ok tasks; a phase whose with block raised inside one is left out)
            figs = _cost_figures(set(records_frame(mine, failed="drop")["figure"]), exp, say)
            if figs:
                save(plot_phase_cost(mine, experiment=exp, failed="drop", figures=figs),
                     f"{_safe(exp)}_{first}_phase_cost.png")
    marker.end()
    return written
