"""Results as pandas DataFrames, and the plots people look at.

The harness writes one JSON per arm (docs/harness.md); an arm run live from a
notebook returns the same JSON wrapped in an ArmResult.  Everything here takes
either, as a `source`:

    a results folder (str / Path; every arm JSON under it, recursively),
    one arm JSON file, an ArmResult, {arm: ArmResult} as Experiment.run()
    returns it, a raw arm dict, or a list of any of these.

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

import json
import math
import os
import re

try:
    import numpy as np
    import pandas as pd
    from matplotlib.figure import Figure
except ImportError as e:  # pragma: no cover - depends on the install
    raise ImportError(f"heaplab.analysis needs pandas and matplotlib ({e}); "
                      "install them with: pip install 'heaplab[analysis]'") from None

from .harness import FIGURES, load_arms

MiB = 1 << 20

# Units of the phase-record figures (docs/harness.md).  Everything else is
# named by its suffix, see unit_of().
RECORD_UNITS = {f: "bytes" for f in FIGURES}
RECORD_UNITS.update({"duration_s": "s", "vmas_after": "count", "samples": "count"})

# Figures computed from a record's own figures (source "derived"), all bytes.
DERIVED = {
    "phys_growth": "phys_after - phys_before: what the phase left charged",
    "phys_peak_growth": "phys_peak - phys_before: the most the phase cost at any instant",
    "phys_returned": "phys_before - phys_low_after_mark: what came back after the mark",
    "resident_growth": "resident_after - resident_before: the heap's own residency (mincore)",
}

# Notes whose names do not carry their unit (experiments' own figures).
NOTE_UNITS = {"peak_large_live": "bytes", "mark_s": "s"}

COLUMNS = ["experiment", "arm", "phase", "index", "figure", "value", "unit", "source"]
SERIES_COLUMNS = ["experiment", "arm", "t_s", "phys", "rss", "lazyfree", "phase"]
PHASE_COLUMNS = ["experiment", "arm", "index", "phase", "t_start_s", "t_end_s", "duration_s",
                 "mark", "mark_s"]

_SUFFIX_UNITS = (("_mib_s", "MiB/s"), ("_bytes", "bytes"), ("_mib", "MiB"), ("_ns", "ns"),
                 ("_ms", "ms"), ("_us", "us"), ("_s", "s"), ("_pct", "%"))


def unit_of(name, value=None, source="note"):
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


# ---- sources --------------------------------------------------------------------------

def arms(source):
    """The arm JSON dicts of a source (see the module docstring), in order."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if os.path.isdir(path):
            found = load_arms(path)
            # os.walk visits experiment folders in no set order: E1, E2, ..., E10
            found.sort(key=lambda a: _natural(a["experiment"]))
            if not found:
                raise ValueError(f"{path}: no arm results in this folder "
                                 "(expected <experiment>/<arm>.json files written by the harness)")
            return found
        if os.path.isfile(path):
            with open(path) as f:
                try:
                    data = json.load(f)
                except ValueError as e:
                    raise ValueError(f"{path}: not JSON ({e})") from None
            return arms(data)
        raise ValueError(f"{path}: no such file or folder")
    data = getattr(source, "data", None)           # an ArmResult
    if isinstance(data, dict):
        return arms(data)
    if isinstance(source, dict):
        if "records" in source and "arm" in source:
            return [source]
        if source and all(hasattr(v, "data") or isinstance(v, dict) for v in source.values()):
            return [a for v in source.values() for a in arms(v)]
        raise ValueError("a dict source must be an arm's JSON (with 'arm' and 'records') "
                         f"or {{arm: ArmResult}}; got keys {sorted(source)[:8]}")
    if isinstance(source, (list, tuple)):
        return [a for item in source for a in arms(item)]
    raise TypeError(f"cannot read results from {type(source).__name__}: expected a results "
                    "folder, an arm JSON file, an ArmResult, {arm: ArmResult} or an arm dict")


def _natural(name):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", str(name))]


def experiments(source):
    """The experiment names in a source, in order of first appearance."""
    return list(dict.fromkeys(a["experiment"] for a in arms(source)))


def _select(source, experiment=None, arm_names=None):
    """The arms of one experiment (the only one, or the named one)."""
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


# ---- frames ---------------------------------------------------------------------------

def _number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def records_frame(source, stats=True, notes=True, derived=True):
    """The tidy table: one row per experiment x arm x phase x figure.

    Columns: experiment, arm, phase, index (the phase's position in its arm),
    figure, value (float, in `unit`), unit (bytes, MiB, MiB/s, s, ms, ns,
    count, ...), source (record: the harness's figures; derived: phys_growth,
    phys_peak_growth, phys_returned, resident_growth; stat: the heap's
    counters at the end of the phase, named stats.<counter>; note: the
    experiment's own numbers, named notes.<key> -- prefixed because a note
    often reuses a counter's name for a different figure, e.g. E2's
    notes.cycles counts the churn's cycles, stats.cycles every cycle so far).
    A figure the phase does not have (null, or not a number) has no row."""
    rows = []
    for a in arms(source):
        for pos, r in enumerate(a["records"]):
            key = (r.get("experiment", a["experiment"]), r.get("arm", a["arm"]), r["phase"],
                   r.get("index", pos))

            def add(figure, value, unit, src):
                if _number(value):
                    rows.append((*key, figure, float(value), unit, src))

            for f in (*FIGURES, "samples"):
                add(f, r.get(f), RECORD_UNITS[f], "record")
            if derived:
                g = r.get
                if _number(g("phys_after")) and _number(g("phys_before")):
                    add("phys_growth", g("phys_after") - g("phys_before"), "bytes", "derived")
                if _number(g("phys_peak")) and _number(g("phys_before")):
                    add("phys_peak_growth", g("phys_peak") - g("phys_before"), "bytes", "derived")
                if _number(g("phys_low_after_mark")) and _number(g("phys_before")):
                    add("phys_returned", g("phys_before") - g("phys_low_after_mark"), "bytes",
                        "derived")
                if _number(g("resident_after")) and _number(g("resident_before")):
                    add("resident_growth", g("resident_after") - g("resident_before"), "bytes",
                        "derived")
            if stats:
                for k, v in (r.get("stats") or {}).items():
                    add("stats." + k, v, unit_of(k, v, "stat"), "stat")
            if notes:
                for k, v in (r.get("notes") or {}).items():
                    add("notes." + k, v, unit_of(k, v, "note"), "note")
    df = pd.DataFrame(rows, columns=COLUMNS)
    return df.astype({"index": "int64", "value": "float64"})


def to_unit(df, unit="MiB"):
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


def wide(df, figures=WIDE_FIGURES, unit="MiB"):
    """One row per experiment x arm x phase, one column per figure (bytes
    shown in MiB by default) -- the table a notebook shows.  `df` is a
    records_frame (or a source, which is read first)."""
    if not isinstance(df, pd.DataFrame):
        df = records_frame(df)
    if unit is not None:
        df = to_unit(df, unit)
    if figures is not None:
        unknown = [f for f in figures if f not in set(df["figure"])]
        figures = [f for f in figures if f not in unknown]
        df = df[df["figure"].isin(figures)]
    order = {a: i for i, a in enumerate(dict.fromkeys(df["arm"]))}
    t = df.pivot_table(index=["experiment", "arm", "index", "phase"], columns="figure",
                       values="value", aggfunc="first", sort=False)
    t = t.reset_index()
    t["_arm"] = t["arm"].map(order)
    t = t.sort_values(["experiment", "_arm", "index"]).drop(columns=["_arm", "index"])
    cols = [f for f in (figures or t.columns) if f in t.columns and f not in
            ("experiment", "arm", "phase")]
    t = t.set_index(["experiment", "arm", "phase"])[cols]
    t.columns.name = None
    return t


def phases_frame(source):
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


def series_frame(source):
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
_ARM_COLOURS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
                "#7f7f7f", "#bcbd22", "#17becf")


def mark_phases(ax, phases, labels=True, marks=True):
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


def plot_footprint(source, experiment=None, arms=None, overlay=None, rss=True, sharey=True,
                   title=None, width=10.0):
    """Footprint over time per arm, phases marked.

    One panel per arm (shared axes, so arms compare at a glance): the
    sampled phys_footprint (solid), rss (dashed), lazyfree if any, the
    phases shaded and named, dotted lines at the marks.  overlay=True draws
    every arm's phys_footprint on one axis instead, with the first arm's
    phases marked -- the better view for many arms of one phase each (E3);
    overlay=None picks it for more than three arms of at most one phase.
    Returns a matplotlib Figure."""
    from matplotlib.lines import Line2D

    experiment, sel = _select(source, experiment, arms)
    ser = series_frame(sel)
    ph = phases_frame(sel)
    names = [a["arm"] for a in sel]
    failed = {a["arm"] for a in sel if a.get("error")}
    if overlay is None:
        overlay = len(names) > 3 and all(len(a["records"]) <= 1 for a in sel)
    head = " ".join(x for x in (experiment, sel[0].get("title", "")) if x)
    title = title or f"{head}: footprint over time"
    mark_handle = Line2D([], [], color="k", lw=0.9, ls=":", label="mark (lowest-after window)")
    if overlay:
        fig = Figure(figsize=(width, 4.6), layout="constrained")
        ax = fig.add_subplot()
        for i, name in enumerate(names):
            s = ser[ser["arm"] == name]
            ax.plot(s["t_s"], s["phys"] / MiB, color=_ARM_COLOURS[i % len(_ARM_COLOURS)],
                    lw=1.4, label=name + (" (failed)" if name in failed else ""))
        mark_phases(ax, ph[ph["arm"] == names[0]])
        _finish_axis(ax, ser)
        ax.set_ylabel("phys_footprint (MiB)")
        handles, _ = ax.get_legend_handles_labels()
        if ph["mark_s"].notna().any():
            handles.append(mark_handle)
        fig.legend(handles=handles, loc="outside right upper", fontsize=8)
        ax.set_xlabel(f"seconds since the arm started (phases of {names[0]})")
        fig.suptitle(title)
        return fig
    fig = Figure(figsize=(width, 1.1 + 2.3 * len(names)), layout="constrained")
    axes = fig.subplots(len(names), 1, sharex=True, sharey=sharey, squeeze=False)[:, 0]
    for i, (ax, name) in enumerate(zip(axes, names)):
        s = ser[ser["arm"] == name]
        colour = _ARM_COLOURS[i % len(_ARM_COLOURS)]
        if len(s):
            ax.plot(s["t_s"], s["phys"] / MiB, color=colour, lw=1.6)
            if rss:
                ax.plot(s["t_s"], s["rss"] / MiB, color=colour, lw=0.9, ls="--", alpha=0.6)
            if (s["lazyfree"] > 0).any():
                ax.plot(s["t_s"], s["lazyfree"] / MiB, color="0.3", lw=0.9, ls="-.")
        else:
            ax.text(0.5, 0.5, "no samples", transform=ax.transAxes, ha="center")
        mark_phases(ax, ph[ph["arm"] == name])
        label = name + (" (failed)" if name in failed else "")
        ax.set_ylabel(f"{label}\nMiB")
        if not sharey:
            _finish_axis(ax, s)
    if sharey:
        _finish_axis(axes[0], ser)
    for ax in axes:
        ax.grid(axis="y", alpha=0.3)
    handles = [Line2D([], [], color="0.2", lw=1.6, label="phys_footprint")]
    if rss:
        handles.append(Line2D([], [], color="0.2", lw=0.9, ls="--", alpha=0.6, label="rss"))
    if (ser["lazyfree"] > 0).any():
        handles.append(Line2D([], [], color="0.3", lw=0.9, ls="-.", label="lazyfree"))
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


def plot_phase_cost(source, experiment=None, arms=None, figures=("phys_growth", "duration_s"),
                    phases=None, title=None, width=10.0):
    """Per-phase cost per arm: one panel per figure (default: what the phase
    left charged, phys_growth, in MiB; and how long it took, in s), phases
    on x (all, or the ones named in `phases`), one bar per arm, values
    written on the bars.  Any figure of records_frame works, e.g.
    "phys_peak_growth" or "notes.major_sweeps".
    Returns a matplotlib Figure."""
    if isinstance(figures, str):
        figures = (figures,)
    experiment, sel = _select(source, experiment, arms)
    df = to_unit(records_frame(sel), "MiB")
    names = [a["arm"] for a in sel]
    unknown = [f for f in figures if f not in set(df["figure"])]
    if unknown:
        raise ValueError(f"experiment {experiment}: no figure(s) {unknown} in its records "
                         f"(figures: {sorted(set(df['figure']))})")
    order = _phase_order(df)
    if phases is not None:
        missing = [p for p in phases if p not in order]
        if missing:
            raise ValueError(f"experiment {experiment}: no phase(s) {missing} (phases: {order})")
        order = list(phases)
    if len(order) == 1:
        # one phase: the arms are the categories, and the panels sit side by side
        fig = Figure(figsize=(width, 4.2), layout="constrained")
        axes = fig.subplots(1, len(figures), squeeze=False)[0, :]
    else:
        fig = Figure(figsize=(width, 0.8 + 3.0 * len(figures)), layout="constrained")
        axes = fig.subplots(len(figures), 1, squeeze=False)[:, 0]
    n = len(names)
    wbar = 0.8 / n
    for ax, fig_name in zip(axes, figures):
        d = df[df["figure"] == fig_name]
        unit = d["unit"].iloc[0]
        if unit in ("ns", "us"):            # counters in ns read better in ms
            d = d.assign(value=d["value"] / (1e6 if unit == "ns" else 1e3))
            unit = "ms"
        if len(order) == 1:
            v = d.drop_duplicates("arm").set_index("arm")["value"].reindex(names)
            bars = ax.bar(np.arange(n), v.to_numpy(dtype=float), 0.8,
                          color=[_ARM_COLOURS[i % len(_ARM_COLOURS)] for i in range(n)])
            ax.bar_label(bars, fmt=_short, fontsize=7, padding=1)
            ax.set_xticks(np.arange(n), names, fontsize=8, rotation=30 if n > 3 else 0)
            ax.set_xlabel(f"arm (phase {order[0]})", fontsize=9)
        else:
            for i, name in enumerate(names):
                v = (d[d["arm"] == name].drop_duplicates("phase").set_index("phase")["value"]
                     .reindex(order))
                x = np.arange(len(order)) + (i - (n - 1) / 2) * wbar
                bars = ax.bar(x, v.to_numpy(dtype=float), wbar * 0.95, label=name,
                              color=_ARM_COLOURS[i % len(_ARM_COLOURS)])
                if len(order) * n <= 40:
                    ax.bar_label(bars, fmt=_short, fontsize=7, padding=1)
            ax.set_xticks(np.arange(len(order)), order, fontsize=9)
            ax.legend(fontsize=8)
        ax.axhline(0, color="0.3", lw=0.8)
        ax.set_ylabel(f"{fig_name} ({unit})")
        ax.margins(y=0.15)
        ax.grid(axis="y", alpha=0.3)
    fig.suptitle(title or f"{experiment}: cost per phase and arm")
    return fig


def plot_vmas(source, experiment=None, arms=None, figures=("vmas_after",), log=None, title=None,
              width=10.0):
    """VMA counts per round: one line per arm (and per figure: solid, dashed,
    dotted), phases that have the figure on x.  The default figure is the
    harness's vmas_after (VMAs over the heap's reservation when the phase
    ended); an experiment that counts VMAs mid-phase names its notes, e.g.
    figures=("notes.vmas_after_release", "notes.vmas_after_reuse") for E5.
    log=None picks a log scale when the counts span 20x or more (hundreds
    with dump_toggle against 1 without).  Returns a matplotlib Figure."""
    if isinstance(figures, str):
        figures = (figures,)
    experiment, sel = _select(source, experiment, arms)
    df = records_frame(sel, stats=False)
    d = df[df["figure"].isin(figures)]
    if d.empty:
        raise ValueError(f"experiment {experiment}: no phase recorded {list(figures)} "
                         "(the harness counts VMAs for a phase given heap=)")
    names = [a["arm"] for a in sel]
    order = _phase_order(d)
    fig = Figure(figsize=(width, 4.2), layout="constrained")
    ax = fig.add_subplot()
    styles = ("-", "--", ":", "-.")
    for i, name in enumerate(names):
        for j, fig_name in enumerate(figures):
            v = d[(d["arm"] == name) & (d["figure"] == fig_name)].sort_values("index")
            if v.empty:
                continue
            xs = [order.index(p) for p in v["phase"]]
            label = name if len(figures) == 1 else f"{name}: {fig_name.removeprefix('notes.')}"
            ax.plot(xs, v["value"], marker="o", lw=1.5, ls=styles[j % len(styles)], label=label,
                    color=_ARM_COLOURS[i % len(_ARM_COLOURS)])
            ax.annotate(f"{v['value'].iloc[-1]:,.0f}", (xs[-1], v["value"].iloc[-1]),
                        textcoords="offset points", xytext=(6, 0), va="center", fontsize=8)
    lo, hi = d["value"].min(), d["value"].max()
    if log is None:
        log = lo > 0 and hi / lo >= 20
    if log:
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(lambda v, _pos: f"{v:,.0f}")
    else:
        ax.set_ylim(bottom=0, top=max(hi, 1) * 1.15)
    ax.set_xticks(range(len(order)), order, fontsize=9)
    ax.set_xlim(-0.3, len(order) - 0.4)
    ax.set_ylabel("VMAs over the heap" + (" (log)" if log else ""))
    ax.set_xlabel("phase (round)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.suptitle(title or f"{experiment}: VMA count per round")
    return fig


# ---- report ---------------------------------------------------------------------------

def _safe(name):
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in str(name))


def report(source, out=None, dpi=110, log=None):
    """Write the plots and tables for every experiment in `source`:

        <out>/<experiment>_footprint.png    plot_footprint
        <out>/<experiment>_phase_cost.png   plot_phase_cost
        <out>/<experiment>_vmas.png         plot_vmas, when some phase saw more than one VMA
        <out>/<experiment>_records.csv      records_frame (tidy)
        <out>/<experiment>_phases.csv       wide (MiB)

    `out` defaults to <source>/report when source is a folder.  Returns the
    paths written; `log(message)` is told about each (and about skipped plots)."""
    if out is None:
        if not isinstance(source, (str, os.PathLike)):
            raise ValueError("report: name an output folder (out=) for results not read from disk")
        out = os.path.join(os.fspath(source), "report")
    os.makedirs(out, exist_ok=True)
    say = log or (lambda msg: None)
    found = arms(source)
    written = []

    def save_fig(fig, name):
        path = os.path.join(out, name)
        fig.savefig(path, dpi=dpi)
        written.append(path)
        say(f"wrote {path}")

    for exp in experiments(found):
        _, sel = _select(found, exp)
        base = _safe(exp)
        df = records_frame(sel)
        path = os.path.join(out, f"{base}_records.csv")
        df.to_csv(path, index=False)
        written.append(path)
        say(f"wrote {path}")
        path = os.path.join(out, f"{base}_phases.csv")
        wide(df).to_csv(path)
        written.append(path)
        say(f"wrote {path}")
        save_fig(plot_footprint(sel), f"{base}_footprint.png")
        save_fig(plot_phase_cost(sel), f"{base}_phase_cost.png")
        vmas = df[df["figure"] == "vmas_after"]["value"]
        if len(vmas) and vmas.max() > 1:
            save_fig(plot_vmas(sel), f"{base}_vmas.png")
        else:
            say(f"{exp}: no phase saw more than one VMA over the heap; no VMA plot")
    return written
