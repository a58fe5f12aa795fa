"""The experiment harness.

An experiment is a set of arms.  Each arm runs in a fresh interpreter process
(so arms never share a baseline), as a sequence of named phases, and returns
JSON records on its stdout (stderr is never parsed: the seed lost a phase to a
tracer line spliced into a marker).

Every phase records phys_footprint, rss, lazyfree and the heap's residency
before and after, the peak during the phase, and the lowest value seen after a
marked event -- sampled by a C thread (heaplab.Sampler) -- because reclamation
can be asynchronous and a reading at a chosen instant is the wrong measurement.

    E1 = Experiment("E1", "page floor")

    @E1.arm("off", page_release=False)
    @E1.arm("on", page_release=True)
    def page_floor(rec, **options):
        h = heaplab.Heap(**options)
        with rec.phase("fill", heap=h):
            r = h.fill(192 << 20, 256)
        with rec.phase("drop", heap=h) as ph:
            ph.mark()                       # lowest-after-mark starts here
            r.release(); h.collect(cycles=4)

    results = E1.run()                      # {"off": ArmResult, "on": ArmResult}
    results["on"].phase("drop").returned    # phys before - low after mark

Records land in a results folder (HEAPLAB_RESULTS, default ./results), one
JSON file per arm and a CSV of every phase.
"""
from __future__ import annotations

import atexit
import contextlib
import csv
import errno
import importlib.util
import io
import json
import math
import os
import stat
import subprocess
import sys
import time
import traceback
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, NoReturn, Optional,
                    Sequence, Set, Tuple, TypeVar, Union)

from . import Heap, Sampler, footprint

__all__ = [
    "Experiment", "Recorder", "Phase", "ArmResult", "PhaseRecord", "ArmFailed", "FIGURES", "MiB",
    "env_number", "results_dir", "child_env", "run_command_arm", "spawn_arm", "save_arm",
    "load_arms", "write_csv", "mib", "add_progress_listener", "remove_progress_listener",
    "median_arm", "derived_figures", "DERIVED_FIGURES", "collect_until_settled", "phase_status",
    "error_summary", "CSV_COLUMNS", "repeats_mismatch",
    "write_atomic", "ArmTimeout", "ArmInterrupted", "arm_option", "arm_file_stem",
    "check_arm_names", "sweep_runs_under", "records_lock", "environment_options",
    "ProtocolVariable", "protocol_values", "protocol_overridden", "record_protocol",
    "percent", "check_results_dir", "session_info", "new_session", "set_session",
    "saving_interrupted",
]

#: an arm function: fn(rec, **params, **options)
ArmFn = Callable[..., None]
F = TypeVar("F", bound=Callable[..., Any])
ProgressListener = Callable[[str, str, Dict[str, Any]], None]

MiB = 1024 * 1024

# The figures of a phase record, all bytes unless named *_s.
FIGURES = (
    "phys_before", "phys_after", "phys_peak", "phys_low", "phys_low_after_mark",
    "rss_before", "rss_after", "rss_peak", "lazyfree_before", "lazyfree_after",
    "anonymous_before", "anonymous_after", "anon_huge_before", "anon_huge_after",
    "resident_before", "resident_after", "vmas_after", "duration_s",
)


def _name(what: str, value: Any, folder: bool = True) -> str:
    """An experiment's name: a non-empty string that is one folder name (it
    names the results folder; '../x' wrote outside); an arm's (folder=False):
    a non-empty string without NUL (it is a child's argument; save_arm makes
    it a file name)."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a string, not {type(value).__name__} {value!r}")
    if not value or "\0" in value or (folder and (value in (".", "..") or "/" in value)):
        raise ValueError(f"{what} {value!r}: expected a non-empty name without "
                         f"{chr(39) + '/' + chr(39) + ' or ' if folder else ''}NUL")
    return value


def _not_a_folder(path: str, label: str, role: str = "") -> Optional[str]:
    """What is wrong with making `path` a folder when a file is there (the
    message, naming `label`), else None: _make_folder's first check, which
    heaplab report makes before it imports pandas."""
    if os.path.exists(path) and not os.path.isdir(path):
        return f"{label}: not a folder{role}"
    return None


#: the role _make_folder's messages give a report's output folder (--out)
REPORT_OUT_ROLE = " (the report's output folder)"


def _make_folder(path: str, label: str, error: type = ValueError, role: str = "") -> None:
    """path made if missing; `error` (a ValueError, which the CLIs print as one
    line, exit 2) naming `label` when it cannot be: a file is there (--out
    /dev/null was a FileExistsError traceback), no permission."""
    problem = _not_a_folder(path, label, role)
    if problem:
        raise error(problem)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise error(f"{label}: cannot make the folder{role}: {e.strerror or e}") from None


def env_number(var: str, default: float) -> float:
    """A protocol figure an experiment lets the environment override (the
    notebooks run smaller arms through it, docs/analysis.md); unset means the
    protocol's own figure, a non-number is an error naming the variable.
    No range: the suite's experiments read theirs through ProtocolVariable,
    which checks one and is read when the arm runs."""
    v = os.environ.get(var)
    if not v:
        return default
    try:
        return float(v)
    except ValueError:
        raise ValueError(f"{var}={v!r}: expected a number") from None


class ProtocolVariable:
    """A protocol figure of an experiment that the environment may override
    (HEAPLAB_E1_FILL_MIB: the notebooks and sweeps run smaller arms), with
    the range that keeps the experiment's effect measurable.  The one
    checker of every experiment's protocol variables: each experiment used
    to parse its own at import, and a bad value (HEAPLAB_E10_N=abc,
    HEAPLAB_E10_OBJECTS=1e6, HEAPLAB_E1_FILL_MIB=nan) aborted the collection
    of the whole suite with an error that named no variable, while one out
    of range ran (HEAPLAB_E1_FILL_MIB=1, under the 4 MiB warm cache: "returned
    -0.0%", a defect that was none; HEAPLAB_E10_N=0 failed inside the arm).

    value() reads it when it is called (when the test or the arm runs, not
    at import): unset or empty means `default`; else a number (integer=True:
    a whole one; many=True: a comma list of them, each distinct) in
    low..high, or a ValueError naming the variable, its value and the range.
    Experiment(..., protocol=[...]) checks its variables before its first arm
    starts and records the values used in each arm's params["protocol"]."""

    def __init__(self, var: str, default: Any, low: float, high: float, unit: str = "",
                 integer: bool = False, many: bool = False, why: str = "") -> None:
        if not isinstance(var, str) or not var:
            raise TypeError(f"ProtocolVariable: var must be a variable's name, not {var!r}")
        self.var = var
        self.default = tuple(default) if many else default
        self.low, self.high = low, high
        self.unit = unit
        self.integer = integer
        self.many = many
        self.why = why

    def __repr__(self) -> str:
        return f"ProtocolVariable({self.var}, default {self.default!r}, {self.range()})"

    def range(self) -> str:
        """'16..4096 MiB' (what the error and the docs say)."""
        def num(x: float) -> str:
            return f"{x:g}" if not self.integer else f"{int(x)}"
        return f"{num(self.low)}..{num(self.high)}" + (f" {self.unit}" if self.unit else "")

    def _one(self, text: str, raw: str) -> Any:
        kind = "whole numbers" if self.integer and self.many else             "a whole number" if self.integer else "numbers" if self.many else "a number"
        expected = (f"expected {'a comma list of ' if self.many else ''}{kind}"
                    f"{', each' if self.many else ''} in {self.range()}" +
                    (", no two alike" if self.many else "") +
                    (f" ({self.why})" if self.why else ""))
        try:
            v = float(text.strip().replace("_", ""))
        except ValueError:
            raise ValueError(f"{self.var}={raw!r}: {expected}") from None
        if self.integer and math.isfinite(v) and v != int(v):
            raise ValueError(f"{self.var}={raw!r}: {expected}")
        if not (self.low <= v <= self.high):        # (NaN and the infinities too)
            raise ValueError(f"{self.var}={raw!r}: {expected}")
        return int(v) if self.integer else v

    def is_set(self, environ: Optional[Mapping[str, str]] = None) -> bool:
        """Does the environment give it (a value that is not empty)?"""
        environ = os.environ if environ is None else environ
        return bool(environ.get(self.var, "").strip())

    def value(self, environ: Optional[Mapping[str, str]] = None) -> Any:
        """Its value in `environ` (this process's environment by default),
        checked: the default when unset or empty; ValueError naming the
        variable, the value and the range when it is not one."""
        environ = os.environ if environ is None else environ
        raw = environ.get(self.var, "")
        if not raw.strip():
            return self.default
        if not self.many:
            return self._one(raw, raw)
        out = tuple(self._one(x, raw) for x in raw.split(","))
        if len(set(out)) != len(out):
            return self._one("nan", raw)        # (the same error: no two alike)
        return out

    def value_or_default(self, environ: Optional[Mapping[str, str]] = None) -> Any:
        """value(), or the default when the value is bad: for what a module
        must decide at import (E10 declares its arms from HEAPLAB_E10_N) --
        the bad value's error is raised when the test runs (value(), or
        Experiment.run checking its protocol), not at collection."""
        try:
            return self.value(environ)
        except ValueError:
            return self.default

    def __call__(self, environ: Optional[Mapping[str, str]] = None) -> Any:
        return self.value(environ)


def protocol_values(variables: Iterable[ProtocolVariable],
                    environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """{variable name: value} of `variables` in `environ` (each checked:
    ValueError naming the first bad one): what an arm's params["protocol"]
    records -- the sizes it ran with, overridden or not."""
    out: Dict[str, Any] = {}
    for p in variables:
        v = p.value(environ)
        out[p.var] = list(v) if isinstance(v, tuple) else v
    return out


def protocol_overridden(variables: Iterable[ProtocolVariable],
                        environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """The subset of protocol_values whose value is not the protocol's
    default (what an arm JSON's "protocol_overridden" holds, and what the
    pytest plugin's table says beside the seed's figures)."""
    variables = list(variables)
    values = protocol_values(variables, environ)
    return {p.var: values[p.var] for p in variables
            if values[p.var] != (list(p.default) if p.many else p.default)}


def record_protocol(data: Dict[str, Any], variables: Iterable[ProtocolVariable],
                    environ: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """Record the protocol values an arm ran with in its JSON (a command
    arm's, a Lua arm's: Experiment.run does it for its own): params
    ["protocol"] and "protocol_overridden".  Returns data."""
    variables = list(variables)
    data.setdefault("params", {})
    if not isinstance(data["params"], dict):
        data["params"] = {"given": data["params"]}
    data["params"]["protocol"] = protocol_values(variables, environ)
    data["protocol_overridden"] = protocol_overridden(variables, environ)
    return data


def _env_repeat() -> int:
    """$HEAPLAB_REPEAT (what `pytest --repeat N` sets): a whole number >= 1,
    1 when unset.  (It went through float() and int(): 2.5 ran 2 repeats,
    nan and inf raised errors that did not name the variable.)"""
    v = os.environ.get("HEAPLAB_REPEAT")
    if not v:
        return 1
    try:
        n = int(v.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"HEAPLAB_REPEAT={v!r}: expected a whole number of repeats >= 1")
    return n


def _utc_now() -> str:
    """Now, UTC, ISO 8601 to the second ('2026-12-05T17:00:00Z')."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


# the session arms run in (session_info): one per process unless set (the
# pytest plugin gives each pytest session its own, and its xdist workers the
# controller's)
_SESSION: Optional[Dict[str, str]] = None


def new_session() -> Dict[str, str]:
    """A fresh session: {"id": "<UTC time>-<pid>-<random>", "started": ISO time}."""
    return {"id": f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}-"
                  f"{os.urandom(3).hex()}", "started": _utc_now()}


def session_info() -> Dict[str, str]:
    """The session this process's arms run in -- {"id", "started"}, what
    every arm JSON records as "session" (Experiment.run, run_command_arm,
    save_arm): the records of two sessions side by side in a folder (an
    interrupted session's and a later one's) are told apart by it."""
    global _SESSION
    if _SESSION is None:
        _SESSION = new_session()
    return dict(_SESSION)


def set_session(info: Optional[Dict[str, str]]) -> Optional[Dict[str, str]]:
    """Make `info` (new_session(); None: a fresh one on next use) the
    session of the arms from now on; returns the one before."""
    global _SESSION
    before, _SESSION = _SESSION, (dict(info) if info is not None else None)
    return before


def results_dir() -> str:
    """Where arm records are written: $HEAPLAB_RESULTS, else ./results --
    also when it is set but empty (HEAPLAB_RESULTS= wrote an experiment's
    records to ./E4b, then the tables failed "cannot write the tables
    under :")."""
    return os.environ.get("HEAPLAB_RESULTS") or os.path.join(os.getcwd(), "results")


def check_results_dir(var: str = "HEAPLAB_RESULTS") -> Optional[str]:
    """Why the results folder results_dir() names cannot be written, naming
    `var`, or None when it can (it is made if missing, and a file is made
    and removed in it).  Only when $HEAPLAB_RESULTS is set: an unwritable
    one (a file, /proc/x) failed each test after its first arm with a bare
    FileNotFoundError."""
    if not os.environ.get(var):
        return None
    path = os.path.abspath(results_dir())
    if os.path.exists(path) and not os.path.isdir(path):
        return f"{var}={os.environ[var]!r}: the results folder {path} is not a folder"
    try:
        os.makedirs(path, exist_ok=True)
        fd, probe = __import__("tempfile").mkstemp(prefix=".heaplab-probe.", dir=path)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        return (f"{var}={os.environ[var]!r}: the results folder {path} cannot be made or "
                f"written: {e.strerror or e}")
    return None


# ---- inside an arm's process ---------------------------------------------------------

def _json_note(key: Any, value: Any) -> str:
    """key, once key and value are what the arm's JSON can hold: a value
    that is not was found only when the child printed its JSON, and the
    whole arm's records were lost with it."""
    if not isinstance(key, str):
        raise TypeError(f"note: the key must be a string, not {type(key).__name__} {key!r}")
    try:
        json.dumps(value, allow_nan=True)
    except (TypeError, ValueError) as e:
        raise TypeError(f"note {key!r}: the value must be JSON-serialisable (numbers, strings, "
                        f"lists, dicts): {e}") from None
    return key


def _raised(exc_type: Any, exc: Any) -> str:
    """A phase's status: 'ok', or 'raised: ExcType: message' (first line,
    at most 200 characters) when its with block raised."""
    if exc_type is None:
        return "ok"
    msg = str(exc).strip().splitlines()[0] if exc is not None and str(exc).strip() else ""
    text = exc_type.__name__ + (f": {msg}" if msg else "")
    return "raised: " + (text if len(text) <= 200 else text[:197] + "...")


def phase_status(record: Mapping[str, Any]) -> str:
    """A phase record's status: 'ok', or 'raised: ExcType: message' when the
    phase's with block raised (its figures stop where it raised: no
    measurement of the phase; the Lua harness writes 'raised: ' and the
    first line of the Lua error).  Records written before phases carried a
    status count as 'ok'."""
    status = record.get("status")
    return "ok" if status is None else str(status)


def error_summary(error: Any) -> str:
    """An arm's error on one line: '' for none; for a traceback, the first
    line of its (last) exception ('RuntimeError: boom'); else the message's
    first line ('E1/on: interrupted (KeyboardInterrupt): ...'); at most 300
    characters -- what records.csv shows (the arm's JSON has it all)."""
    if not error:
        return ""
    lines = str(error).strip().splitlines()
    if lines and lines[0].startswith("Traceback (most recent call last)"):
        # the line after the last frame's indented ones (its source, 3.11's
        # carets): an indented line of the message is not a frame's
        frames = [i for i, ln in enumerate(lines) if ln.startswith('  File "')]
        if frames:
            i = frames[-1] + 1
            while i < len(lines) and lines[i][:1].isspace():
                i += 1
            lines = lines[i:]
    lines = [ln.strip() for ln in lines if ln.strip()]
    text = lines[0] if lines else ""
    return text if len(text) <= 300 else text[:297] + "..."


def _phase_name(name: Any) -> str:
    """A phase's name, checked at the call (rec.phase, ctl.phase): a
    non-empty string.  rec.phase(None) and ctl.phase(7) were taken, and the
    arm's JSON could not be read later ("record 0 is not a phase record")."""
    if not isinstance(name, str):
        raise TypeError(f"a phase's name must be a string, not {type(name).__name__} {name!r}")
    if not name:
        raise ValueError("a phase's name must not be empty")
    return name


def _enter_phase(phase: Any, owner: Any, begin: Callable[[], Any]) -> Any:
    """A phase object is one with block: entered a second time, its record
    shared the notes dict of the first (each record got the other's notes)
    and kept the first one's mark (a phase that never marked got a
    phys_low_after_mark of 0 instead of null).  Phases do not nest: an arm
    has one sampler, which a phase resets when it begins -- an outer phase
    went on from the inner one's reset (its peak missed what came before,
    its lowest after a mark read 0).  Returns begin()'s value; a begin that
    raises leaves no phase open."""
    if phase.entered:
        raise RuntimeError(f"phase {phase.name!r} was already entered: a phase object is one "
                           f"with block; call phase({phase.name!r}) again for another")
    outer = owner._in_phase
    if outer is not None:
        raise RuntimeError(f"phase {phase.name!r} begun inside phase {outer!r}: phases do not "
                           f"nest (an arm has one sampler); end {outer!r} first")
    phase.entered = True
    owner._in_phase = phase.name
    try:
        return begin()
    except BaseException:
        owner._in_phase = None
        raise


class Phase:
    """One named phase of an arm; use through Recorder.phase() (one with
    block each: entering it again raises RuntimeError)."""

    def __init__(self, recorder: Recorder, name: str, heap: Optional[Heap]) -> None:
        self.rec = recorder
        self.name = name
        self.heap = heap
        self.notes = {}
        self.marked = False
        self.entered = False

    def _heap_figures(self) -> Tuple[Optional[int], Optional[int]]:
        h = self.heap
        if h is None or h.closed:
            return None, None
        return h.resident_bytes(), h.vma_count()

    def __enter__(self) -> Phase:
        return _enter_phase(self, self.rec, self._begin)

    def _begin(self) -> Phase:
        s = self.rec.sampler
        s.reset()
        f = footprint()
        self.t0 = time.monotonic_ns()
        res, _ = self._heap_figures()
        self.record = {
            "experiment": self.rec.experiment, "arm": self.rec.arm, "phase": self.name,
            "index": len(self.rec.records), "t_start_s": (self.t0 - self.rec.t0) / 1e9,
            "phys_before": f.phys_footprint, "rss_before": f.rss, "lazyfree_before": f.lazyfree,
            "anonymous_before": f.anonymous, "anon_huge_before": f.anon_huge,
            "resident_before": res,
        }
        return self

    def mark(self, label: str = "event") -> None:
        """Start the lowest-after-mark window now (e.g. just before a drop)."""
        self.rec.sampler.mark()
        self.marked = True
        self.notes["mark"] = label
        self.notes["mark_s"] = (time.monotonic_ns() - self.rec.t0) / 1e9

    def note(self, key: str, value: Any) -> None:
        """Attach a figure of the experiment's own (JSON-serialisable)."""
        self.notes[_json_note(key, value)] = value

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> bool:
        self.rec._in_phase = None
        summ = self.rec.sampler.summary()
        f = footprint()
        t1 = time.monotonic_ns()
        res, vmas = self._heap_figures()
        r = self.record
        r.update({
            "t_end_s": (t1 - self.rec.t0) / 1e9, "duration_s": (t1 - self.t0) / 1e9,
            "phys_after": f.phys_footprint, "rss_after": f.rss, "lazyfree_after": f.lazyfree,
            "anonymous_after": f.anonymous, "anon_huge_after": f.anon_huge,
            "resident_after": res, "vmas_after": vmas,
            "phys_peak": summ["max_phys"], "phys_low": summ["min_phys"],
            "rss_peak": summ["max_rss"],
            "phys_low_after_mark": summ["min_phys_after_mark"] if self.marked else None,
            "samples": summ["samples"],
            "notes": self.notes,
            "status": _raised(exc_type, exc),
        })
        if self.heap is not None and not self.heap.closed:
            r["stats"] = self.heap.stats().as_dict()
        self.rec.records.append(r)
        return False


class Recorder:
    """What an arm function receives: phase() and the records so far."""

    def __init__(self, experiment: str, arm: str, interval_s: float = 0.002) -> None:
        self.experiment = experiment
        self.arm = arm
        self.records = []
        self.notes = {}
        self.t0 = time.monotonic_ns()
        self.sampler = Sampler(interval_s=interval_s)
        self.interval_s = interval_s
        self._earlier = []     # the series of samplers set_interval replaced
        self._in_phase = None  # the name of the phase in its with block

    def set_interval(self, interval_s: float) -> None:
        """Sample at another interval from now on (a new sampler); the series
        keeps what the earlier samplers recorded.  Not inside a phase, whose
        figures come from the sampler it began with (RuntimeError)."""
        if self._in_phase is not None:
            raise RuntimeError(f"set_interval inside phase {self._in_phase!r}: the phase's "
                               f"figures come from the sampler it began with; call it "
                               f"between phases")
        self._earlier.extend(self.sampler.series())
        self.sampler.stop()
        try:
            self.sampler = Sampler(interval_s=interval_s)
        except BaseException:
            # a bad interval: sampling goes on as it was (the stopped sampler
            # stayed, and the arm's series then lost every record of the arm)
            self.sampler = Sampler(interval_s=self.interval_s)
            raise
        self.interval_s = interval_s

    def phase(self, name: str, heap: Optional[Heap] = None) -> Phase:
        """A phase to run in a with block; heap= adds the heap's residency,
        VMAs and stats to its record."""
        return Phase(self, _phase_name(name), heap)

    def note(self, key: str, value: Any) -> None:
        """Attach a figure of the experiment's own to the arm (JSON-serialisable)."""
        self.notes[_json_note(key, value)] = value

    def series(self) -> List[List[float]]:
        """The arm's footprint time series: [[t_s, phys, rss, lazyfree], ...]."""
        samples = self._earlier + list(self.sampler.series())
        return [[(t - self.t0) / 1e9, p, r, l] for t, p, r, l in samples]


# the experiment module an arm's process is importing (_child_main), else
# None: Experiment.run refuses to run while it is -- a module that runs its
# experiment at import, without `if __name__ == "__main__":`, made each arm's
# process run the whole experiment again, whose arms did the same (some
# 2,000 processes in 2.5 minutes, each in a session of its own, going on
# after the first script had ended)
_IMPORTING_FOR_AN_ARM: Optional[str] = None


def _flush_stdio() -> None:
    """Flush sys.stdout and sys.stderr before an os._exit (which does not),
    a closed or broken one passed over."""
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except (OSError, ValueError):
            pass


def _forked_child_exit(exc: Optional[BaseException]) -> NoReturn:
    """End a process the arm forked (os.fork in a phase) that left the arm's
    function -- by sys.exit(), an exception, or returning: only the arm's own
    process writes the result (the child's JSON went into the arm's pipe
    after its own, and the arm failed "no arm JSON on stdout", its records
    lost).  Its exit status is sys.exit()'s, 1 for an exception (its
    traceback on stderr), 0 for a return; os._exit, its stdio flushed."""
    rc = 0
    if isinstance(exc, SystemExit):
        code = exc.code
        if code is None or isinstance(code, int):
            rc = code or 0
        else:
            print(code, file=sys.stderr)
            rc = 1
    elif exc is not None:
        traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)
        rc = 1
    _flush_stdio()
    os._exit(rc & 0xFF)


def _experiment_module_name(path: str) -> str:
    """The name an arm's process imports the experiment's module under: its
    file's name (exp.py: "exp"), unless that is no identifier or the name
    of a module imported already or of the standard library's -- then
    "_heaplab_experiment" (which a multiprocessing spawn child cannot
    import)."""
    name = os.path.splitext(os.path.basename(path))[0]
    stdlib = getattr(sys, "stdlib_module_names", ())
    if (not name.isidentifier() or name in sys.modules or name in stdlib
            or name in sys.builtin_module_names or name in ("heaplab", "__main__", "__mp_main__")):
        return "_heaplab_experiment"
    return name


def _child_main(argv: Sequence[str]) -> int:
    path, exp_name, arm_name = argv
    # stdout is the arm's JSON and nothing else: what the arm prints (print(),
    # a library's C printf, a subprocess that inherits fd 1) goes to stderr
    # -- a print() in an arm spliced itself into the JSON and lost the arm
    sys.stdout.flush()
    result = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    # the module as a script's code sees it: its folder first on sys.path
    # (a sibling import failed from another cwd), and under its own name, so
    # that what multiprocessing's spawn and forkserver children unpickle
    # (module.function) they can import -- as "_heaplab_experiment" a Pool
    # of them failed "No module named '_heaplab_experiment'" and hung until
    # the arm's timeout
    folder = os.path.dirname(os.path.abspath(path))
    sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(_experiment_module_name(path), path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    # (on heaplab.harness: run as `python -m heaplab.harness`, this module
    # is __main__, and the experiment's module imports another copy of it)
    from heaplab import harness as shared
    shared._IMPORTING_FOR_AN_ARM = path
    try:
        spec.loader.exec_module(mod)
    finally:
        shared._IMPORTING_FOR_AN_ARM = None
    exp = getattr(mod, exp_name)
    arm = exp.arms[arm_name]
    rec = Recorder(exp.name, arm_name)
    out = {"experiment": exp.name, "title": exp.title, "arm": arm_name, "options": arm["options"],
           # (the options the arm sets itself win: those are not the environment's)
           "environment_options": shared.environment_options(set_by=arm["options"]),
           "params": dict(arm["params"]), "pid": os.getpid(), "error": None}
    try:
        if exp.protocol:        # (the sizes it runs with: checked, recorded)
            record_protocol(out, exp.protocol)
        arm["fn"](rec, **arm["params"], **arm["options"])
    except BaseException as e:  # report, do not lose the records so far
        if os.getpid() != out["pid"]:
            _forked_child_exit(e)
        out["error"] = traceback.format_exc()
    if os.getpid() != out["pid"]:
        _forked_child_exit(None)
    out["records"] = rec.records
    out["notes"] = rec.notes
    out["series"] = rec.series()
    rec.sampler.stop()
    try:
        text = json.dumps(out)
    except (TypeError, ValueError) as e:   # (an arm's params or options): say so, keep the rest
        out["error"] = (out["error"] or "") + f"the arm's JSON: {e} (written with repr())"
        text = json.dumps(out, default=repr)
    sys.stdout.flush()
    result.write(text)
    result.flush()
    result.close()
    rc = 0 if out["error"] is None else 1
    # the result is written: the process ends the usual way (the
    # interpreter's exit stops an executor's idle workers, runs the atexit
    # handlers, the C library's and gcov's, flushes logging) -- unless a
    # thread the arm left running (not a daemon) holds that exit: its wait
    # for the thread made the harness say "no result within T s", the
    # complete JSON lost.  A daemon timer ends such a process
    # _THREAD_EXIT_GRACE_S later (the line naming the threads on stderr);
    # one that exits in time never sees it
    import threading
    timer = threading.Timer(_THREAD_EXIT_GRACE_S, _exit_held_by_threads,
                            args=(f"{exp.name}/{arm_name}", rc))
    timer.daemon = True
    timer.name = "heaplab-exit-guard"
    timer.start()
    return rc


# how long an arm's process may take to exit once it has written its JSON
# before a non-daemon thread that holds its exit is left behind (os._exit)
_THREAD_EXIT_GRACE_S = 3.0


def _exit_held_by_threads(label: str, rc: int) -> None:
    """End the arm's process (os._exit(rc), its stdio flushed) if threads it
    left running that are not daemons still hold its exit, saying which on
    stderr."""
    import threading
    left = [t for t in threading.enumerate()
            if t is not threading.main_thread() and t.is_alive() and not t.daemon]
    if not left:
        return
    names = ", ".join(repr(t.name) for t in left[:5]) + (", ..." if len(left) > 5 else "")
    print(f"heaplab: {label}: {len(left)} non-daemon thread(s) still running "
          f"{_THREAD_EXIT_GRACE_S:g} s after the arm had returned ({names}): the arm's process "
          f"ends without waiting for them (its JSON is written; its atexit handlers do not "
          f"run)", file=sys.stderr)
    _flush_stdio()
    os._exit(rc)


# ---- in the parent ------------------------------------------------------------------------

class ArmFailed(RuntimeError):
    """An arm's process failed: it raised, timed out or printed no JSON.
    `data`: the arm's JSON when it had written one (a process still running
    at its timeout after it wrote its records: they are kept, with the
    error), else None.

    Raised by Experiment.run(repeat=N) when an arm's repeats recorded
    different phases (they cannot be combined): `results` holds the other
    arms' ArmResults, {arm: ArmResult} as run() returns them, and `repeats`
    each such arm's runs, {arm: [ArmResult of run 0, run 1, ...]} (both {}
    otherwise)."""

    def __init__(self, message: str, data: Optional[Dict[str, Any]] = None,
                 results: Optional[Dict[str, "ArmResult"]] = None,
                 repeats: Optional[Dict[str, List["ArmResult"]]] = None) -> None:
        super().__init__(message)
        self.data = data
        self.results: Dict[str, ArmResult] = dict(results or {})
        self.repeats: Dict[str, List[ArmResult]] = dict(repeats or {})


class ArmInterrupted(KeyboardInterrupt):
    """Ctrl-C while an arm's process ran (run_command_arm without an
    allocator): the process and everything it started were stopped.
    `data` is the arm's partial JSON -- the records it printed when told
    to stop, with "interrupted": true and its error -- or None when it
    printed none.  A KeyboardInterrupt: code that catches that still does."""

    def __init__(self, message: str, data: Optional[Dict[str, Any]] = None) -> None:
        super().__init__(message)
        self.data = data


class ArmTimeout(BaseException):
    """Raised in a run_command_arm script when the arm's timeout expires: by
    the CommandControl helpers called after it (phase(), wait_low()), and
    into the script's thread itself at its next Python instruction.  A
    BaseException (like KeyboardInterrupt), so that a script's `except
    Exception` does not swallow it."""


class ArmResult:
    """The JSON an arm's process returned, with figure helpers."""

    def __init__(self, data: Dict[str, Any]) -> None:
        self.data = data
        #: the runs behind a median (Experiment.run(repeat=N)); [] for one run
        self.repeats: List[ArmResult] = []
        self.records = data["records"]
        self.arm = data["arm"]
        self.experiment = data["experiment"]

    def phase(self, name: str) -> PhaseRecord:
        """The record of the phase called `name` (KeyError naming the phases if none)."""
        for r in self.records:
            if r["phase"] == name:
                return PhaseRecord(r)
        raise KeyError(f"arm {self.arm} has no phase {name!r} "
                       f"(phases: {[r['phase'] for r in self.records]})")

    @property
    def notes(self) -> Dict[str, Any]:
        """The arm's own notes (Recorder.note)."""
        return self.data.get("notes", {})

    @property
    def series(self) -> List[List[float]]:
        """The arm's footprint series: [[t_s, phys, rss, lazyfree], ...]."""
        return self.data.get("series", [])


#: The derived figures of a phase record (all bytes), defined here once:
#: name -> (minuend, subtrahend, what it is).  derived_figures() computes them
#: for PhaseRecord, median_arm, heaplab.analysis (records_frame's "derived"
#: rows, sweep_frame's columns, DERIVED) and the sweep's returned_in_<phase>
#: effects (each had its own copy, and PhaseRecord.returned's gave an
#: unmarked phase phys_before - phys_after where the others had no figure).
DERIVED_FIGURES = {
    "phys_growth": ("phys_after", "phys_before", "what the phase left charged"),
    "phys_peak_growth": ("phys_peak", "phys_before", "the most the phase cost at any instant"),
    "phys_returned": ("phys_before", "phys_low_after_mark",
                      "what came back after the mark (a marked phase only)"),
    "resident_growth": ("resident_after", "resident_before",
                        "the heap's own residency (resident_bytes)"),
}
#: name -> (minuend, subtrahend) of DERIVED_FIGURES
DERIVED_PARTS = {name: (a, b) for name, (a, b, _) in DERIVED_FIGURES.items()}


def derived_figures(record: Mapping[str, Any]) -> Dict[str, Any]:
    """The derived figures (DERIVED_FIGURES) a phase record has, by name:
    each minuend - subtrahend of the record's own figures where both are
    numbers -- so phys_returned only for a phase that was marked (and had a
    sample after its mark) -- or, for median_arm's record of repeats, its
    "derived" (the median of each repeat's own figure; a difference of its
    medians is not that)."""
    d = record.get("derived")
    if isinstance(d, dict):
        return {name: d[name] for name in DERIVED_FIGURES if _real(d.get(name))}
    return {name: record[a] - record[b] for name, (a, b) in DERIVED_PARTS.items()
            if _real(record.get(a)) and _real(record.get(b))}


class PhaseRecord(dict):
    """A phase record (a dict) with the usual derived figures
    (derived_figures).  A record of median_arm (Experiment.run(repeat=N))
    carries them as the median of each repeat's own figure (its "derived"),
    which these return: the same number heaplab report's tables give; a
    difference of medians is not.  A figure the record does not have is a
    ValueError saying why (returned of a phase that was not marked)."""

    def _measured(self) -> None:
        status = phase_status(self)
        if status != "ok":
            raise ValueError(f"{self.get('experiment')}/{self.get('arm')} phase "
                             f"{self.get('phase')!r} {status}: its figures stop where it raised "
                             "and are no measurement of the phase")

    def _figure(self, name: str) -> Any:
        self._measured()
        value = derived_figures(self).get(name)
        if value is not None:
            return value
        a, b = DERIVED_PARTS[name]
        if isinstance(self.get("derived"), dict):
            why = f"none of the repeats had both {a} and {b}"
        else:
            why = f"{a} is {self.get(a)!r} and {b} {self.get(b)!r}: not two numbers"
        if name == "phys_returned" and self.get(b) is None:
            why += (" -- the phase was not marked (Phase.mark), or no sample came after its "
                    "mark; growth is phys_after - phys_before")
        raise ValueError(f"{self.get('experiment')}/{self.get('arm')} phase "
                         f"{self.get('phase')!r} has no {name} ({a} - {b}): {why}")

    @property
    def returned(self) -> int:
        """phys_returned: phys before minus the lowest after the mark (a
        ValueError for a phase that was not marked: it was phys before minus
        phys after there, a figure heaplab.analysis did not give)."""
        return self._figure("phys_returned")

    @property
    def growth(self) -> int:
        """phys_growth: phys_after - phys_before, what the phase left charged."""
        return self._figure("phys_growth")

    @property
    def peak_growth(self) -> int:
        """phys_peak_growth: phys_peak - phys_before, the most the phase cost at any instant."""
        return self._figure("phys_peak_growth")

    def stat(self, name: str) -> int:
        """A counter of the heap's stats at the end of the phase."""
        return self["stats"][name]

    def note(self, name: str) -> Any:
        """A figure the phase noted (Phase.note)."""
        return self["notes"][name]


def child_env(extra: Optional[Mapping[str, str]] = None, drop: Sequence[str] = ()) -> Dict[str, str]:
    """The environment of an arm's process: this one's, less the variables
    whose names start with a prefix in `drop`, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not (drop and k.startswith(tuple(drop)))}
    env["MALLOC_PERTURB_"] = "0"       # DESIGN.md section 5
    env.pop("HEAPLAB_COUNTERS_FILE", None)
    for k, v in (extra or {}).items():
        # (Popen's own refusal named no variable -- "embedded null byte",
        # "illegal environment variable name" -- and came once the group's
        # keeper had started)
        if not isinstance(k, str):
            raise TypeError(f"env: the name {k!r:.60} is {type(k).__name__}, not a string")
        if not isinstance(v, str):
            raise TypeError(f"env {k}: the value {v!r:.60} is {type(v).__name__}, not a string")
        if not k or "=" in k or "\0" in k:
            raise ValueError(f"env {k!r}: not an environment variable's name (empty, or an "
                             f"'=' or a NUL byte in it)")
        if "\0" in v:
            raise ValueError(f"env {k}={v!r:.60}: a NUL byte in the value (no environment "
                             f"variable can hold one)")
    env.update(extra or {})
    return env


# Who is told when an arm's process starts and ends (the pytest plugin prints
# "E1/off ... 3.2 s" lines as the suite runs; `heaplab run` has its own
# display).  Each is called as fn(event, label, info): event "start" (info:
# {}, or {"experiment": name} when run_command_arm is given one), "end"
# (info: {"seconds": s, "ok": bool}, and the experiment when known), "spawn"
# (spawn_arm) or "experiment" (Experiment.run begins: label and info's
# "experiment" are its name).  A listener passes over events it does not know.
_progress_listeners: List[ProgressListener] = []


def add_progress_listener(fn: ProgressListener) -> ProgressListener:
    """Call fn(event, label, info) when an arm's process starts ("start") and
    ends ("end", info has seconds and ok).  Returns fn (remove it with
    remove_progress_listener)."""
    _progress_listeners.append(fn)
    return fn


def remove_progress_listener(fn: ProgressListener) -> None:
    """Stop calling fn (no error if it was not registered)."""
    if fn in _progress_listeners:
        _progress_listeners.remove(fn)


def _announce(event: str, label: str, **info: Any) -> None:
    for fn in list(_progress_listeners):
        try:
            fn(event, label, info)
        except Exception:       # a display must never fail an arm
            pass


def run_command_arm(cmd: Sequence[str], env: Optional[Mapping[str, str]] = None,
                    cwd: Optional[str] = None, timeout: float = 600, label: Optional[str] = None,
                    drop: Sequence[str] = (), *, allocator: Optional[str] = None,
                    script: Optional[Callable[["CommandControl"], None]] = None,
                    experiment: Optional[str] = None, arm: Optional[str] = None,
                    options: Optional[Mapping[str, Any]] = None, interval_s: float = 0.005,
                    stop_signal: Optional[int] = 15) -> Dict[str, Any]:
    """Two forms.

    Without `allocator`: run a program that is one arm (a Python child, a Lua
    script, a launcher) and return the arm JSON it printed on stdout, with
    its `returncode` and `stderr_tail` added (and `warnings` naming what it
    left running in its group when it ended, killed then).  stderr is never
    parsed.
    Raises ArmFailed when it times out or prints no JSON.  env and drop:
    child_env.  `experiment` (optional here) names the experiment to the
    progress listeners (the pytest plugin's tables name an experiment whose
    arms started and left no rows).

    With `allocator` (heaplab | glibc | mimalloc | jemalloc): run ANY
    command -- a server, a compiler, the stock python3 -- on that allocator
    (LD_PRELOAD of libheaplab-malloc.so, of Debian's libmimalloc.so or
    libjemalloc.so; glibc: libheaplab-malloc.so with HEAPLAB_ALLOCATOR=libc,
    which hands every call to glibc, so that a program linked against
    another allocator -- Debian's redis-server and jemalloc -- is on glibc
    too) and sample its footprint from outside (/proc/PID/smaps_rollup, a
    thread of this process, every interval_s).  `script(ctl)` drives it
    through named phases (CommandControl: ctl.phase(name), ph.mark(),
    ctl.wait_low(seconds)); without a script the whole run is one phase
    "run".  After the script the command gets stop_signal (None: it is
    waited for).  options: heaplab options as HEAPLAB_<NAME> (heaplab
    only; each value checked by the library before the command starts; the
    collected-only options, which the preloaded manual heap ignores, refused:
    PRELOAD_IGNORED_OPTIONS; and a command that ran on the system allocator anyway -- the preloaded
    library's fallback -- is the arm's error).  Returns the arm's data in the harness's usual form (records
    with the FIGURES of each phase, series, notes; save_arm writes the JSON
    and CSV) plus `allocator`, `returncode`, `stderr_tail` and `report`
    (heaplab's HEAPLAB_STATS report, None on the other allocators),
    `report_peak_rss` (its peak_rss) and `warnings` (lines that are no
    error: a phase of fewer than 2 samples, a report missing though the
    library was loaded; docs/harness.md)."""
    cmd = _command(cmd)
    timeout = _positive("timeout", timeout)
    if allocator is not None:
        interval_s = _positive("interval_s", interval_s)
        if interval_s > timeout:
            # (1e300: the sampler's thread died of an OverflowError after its
            # first sample, the arm said nothing; h42left, session 42)
            raise ValueError(f"run_command_arm: interval_s {interval_s:g} s is longer than the "
                             f"arm's timeout ({timeout:g} s): no sample would follow the first")
        if stop_signal is not None:
            stop_signal = _signal_number(stop_signal)
        if script is not None and not callable(script):
            raise TypeError(f"run_command_arm: script must be callable (script(ctl)), not "
                            f"{type(script).__name__}")
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"run_command_arm: options must be a mapping of heaplab option "
                            f"names to values, not {type(options).__name__}")
        return _run_sampled_command(cmd, env, cwd, timeout, label, drop, allocator, script,
                                    experiment, arm, options or {}, interval_s, stop_signal)
    label = label or " ".join(map(str, cmd[-2:]))
    t0 = time.monotonic()
    # (experiment: who is told -- the pytest plugin's tables name an
    # experiment whose arms started and left no rows)
    _announce("start", label, **({"experiment": experiment} if experiment else {}))
    ok = False
    seen: Dict[str, Any] = {"experiment": experiment} if experiment else {}
    full_env = child_env(env, drop)
    started = _utc_now()
    # the caller's HEAPLAB_<OPTION> variables this arm gets (not those of
    # `env`, the arm's own; none when `drop` takes HEAPLAB_): its record says
    # so, as an Experiment arm's does -- a Lua arm's said nothing
    inherited = {k: v for k, v in environment_options(child_env(None, drop)).items()
                 if "HEAPLAB_" + k.upper() not in (env or {})}
    try:
        try:
            p = _run_arm_process(cmd, full_env, cwd, timeout, label)
        except (ArmInterrupted, ArmFailed) as e:
            if e.data is not None and "environment_options" not in e.data:
                e.data["environment_options"] = dict(inherited)
            if e.data is not None:
                e.data.setdefault("session", session_info())
                e.data.setdefault("started", started)
            raise
        over = getattr(p, "stdout_over", None)
        if over:
            raise ArmFailed(f"{label}: {_exit_text(p.returncode)}, no arm JSON: {over};\n"
                            f"stdout began: {p.stdout[:200]}\nstderr: {p.stderr[-4000:]}")
        try:
            data = json.loads(p.stdout)
            if not isinstance(data, dict) or not isinstance(data.get("records"), list):
                raise ValueError("not an arm document")
        except ValueError:
            raise ArmFailed(f"{label}: {_exit_text(p.returncode)}, no arm JSON on stdout (an "
                            f"object with its records);\n"
                            f"stdout: {p.stdout[:2000]}\nstderr: {p.stderr[-4000:]}") from None
        _add_process_output(data, label, p.returncode, p.stderr, getattr(p, "strays", []),
                            getattr(p, "left", []))
        # the session that ran it and when the arm started (two sessions'
        # records side by side -- an interrupted one's and a later one's --
        # were told apart by nothing)
        data.setdefault("session", session_info())
        data.setdefault("started", started)
        if "environment_options" not in data:   # (an Experiment arm's child says it itself)
            own = data.get("options") if isinstance(data.get("options"), dict) else {}
            data["environment_options"] = {k: v for k, v in inherited.items() if k not in own}
        ok = p.returncode == 0 and not data.get("error")
        if isinstance(data.get("experiment"), str):
            seen["experiment"] = data["experiment"]
        return data
    finally:
        _announce("end", label, seconds=time.monotonic() - t0, ok=ok, **seen)


# how long an arm's process is given to print its records after Ctrl-C
_INTERRUPT_GRACE_S = 5.0


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


@contextlib.contextmanager
def _signals_handled(signums: Sequence[int], handler: Callable[[int, Any], None],
                     takes: Callable[[Any], bool]) -> Iterator[Dict[int, Any]]:
    """While it lasts, handler handles each of signums whose handler before
    it `takes` -- in the main thread (elsewhere nothing changes: only it
    gets signals' handlers); yields {signum: the handler before}, which are
    put back (SIGINT's with heaplab's interrupt chain: _sigint_put_back).
    The harness's and the sweeps' one way to hold a signal off."""
    import signal as _signal
    import threading
    from . import _sigint_put_back
    before: Dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        before = {n: _signal.signal(n, handler) for n in signums if takes(_signal.getsignal(n))}
    try:
        yield before
    finally:
        for n, h in before.items():
            if n == _signal.SIGINT:
                _sigint_put_back(h)
            else:
                _signal.signal(n, h)


@contextlib.contextmanager
def _ctrl_c_deferred() -> Iterator[None]:
    """A with block that Ctrl-C does not interrupt: SIGINT's Python handler
    is swapped for one that notes it, and the noted Ctrl-C is handed to the
    handler that was there (KeyboardInterrupt) when the block ends.  Around
    a spawn and its registration (a process started, a thread started and
    the object that stops it kept): a KeyboardInterrupt that landed inside
    subprocess.Popen (its wait for the child's exec) or Thread.start (its
    wait for the thread's start) lost the object while what it started ran
    on -- a `sleep infinity` group keeper outliving this process, a
    sampler's thread polling for ever, an arm's process running on
    unsignalled and never reaped -- and around the clean-up that stops them
    (a Ctrl-C there left them too).  Only the main thread gets Ctrl-C (and
    can set a handler); elsewhere, or when SIGINT has no Python handler
    (SIG_IGN, SIG_DFL), the block is a plain one.  Keep the blocks short:
    a Ctrl-C waits for their end."""
    import signal as _signal
    noted: List[Tuple[int, Any]] = []
    before: Dict[int, Any] = {}
    try:
        with _signals_handled((_signal.SIGINT,), lambda n, f: noted.append((n, f)),
                              callable) as before:
            yield
    finally:
        if noted and _signal.SIGINT in before:
            before[_signal.SIGINT](*noted[0])   # (default_int_handler: KeyboardInterrupt)


#: How the harness reads what a child prints: UTF-8, a byte that is not UTF-8
#: replaced by U+FFFD -- a program's stray bytes on stderr (a C library's
#: message, a Lua error carrying binary data) raised UnicodeDecodeError here
#: and lost the arm's records (run_command_arm, Experiment.run, the sweep's
#: run_task, spawn_arm).
_CHILD_TEXT: Dict[str, Any] = {"text": True, "encoding": "utf-8", "errors": "replace"}


# how long the pipes are read once the arm's process has ended and its group
# was killed: what the arm wrote is in them already; a process that left the
# group (setsid) and holds them gets no longer than this
_DRAIN_S = 1.0


# Every process an arm starts carries the arm's tag in this variable (a
# ':'-separated list: an arm inside an arm adds its own), inherited through
# fork and exec, so that a process that left the arm's process group
# (setsid, a daemonizing server, start_new_session=True) is found and killed
# when the arm ends -- it outlived the arm, reparented to init, though the
# group was killed.  (Not HEAPLAB_*: libheaplab reads its options whenever
# one such variable is set.)  A process that clears its environment before
# an exec (env -i) is not found.
ARM_TAG_VAR = "_HEAPLAB_ARMS"


def _boot_ticks() -> int:
    """Now, in the clock ticks since boot that /proc/PID/stat's starttime
    (field 22) counts (CLOCK_BOOTTIME; 0 where there is none)."""
    try:
        ns = time.clock_gettime_ns(time.CLOCK_BOOTTIME)      # type: ignore[attr-defined]
        return ns * os.sysconf("SC_CLK_TCK") // 1_000_000_000
    except (AttributeError, OSError, ValueError):
        return 0


def _tagged_env(env: Optional[Mapping[str, str]]) -> Tuple[Dict[str, str], str]:
    """env (None: this process's) with a new arm tag added to ARM_TAG_VAR;
    returns (the environment, the tag).  The tag says when it was made
    ("PID.TICKS.RANDOM", TICKS: _boot_ticks): _kill_tagged looks at the
    processes started since only."""
    out = dict(os.environ if env is None else env)
    # (a tick early: the two clocks' rounding)
    tag = f"{os.getpid()}.{max(0, _boot_ticks() - 1)}.{os.urandom(6).hex()}"
    out[ARM_TAG_VAR] = ":".join(filter(None, [out.get(ARM_TAG_VAR, ""), tag]))
    return out, tag


def _proc_stat(pid: int) -> Optional[List[bytes]]:
    """/proc/PID/stat's fields after the command's name (field 3, the
    state, first), or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _kill_tagged(tag: str, pgid: Optional[int]) -> List[str]:
    """SIGKILL every process (not this one) outside the process group `pgid`
    (None: any) whose environment carries `tag` (ARM_TAG_VAR) -- the ones
    that left the arm's group; a member of the group is the group kill's --
    until none is left (a few rounds: one may fork meanwhile).  Each round
    waits until what it killed is gone (_wait_killed_gone, at most
    _GONE_WAIT_S in all), as the group's kill does (_wait_group_gone): the
    re-scans waited ~80 ms at most, and a stray with a few GiB to tear down
    outlived the return.  Returns "pid N (command)" of each.  Linux (/proc);
    elsewhere nothing is found.

    Cheap and safe on a busy machine: of each process /proc/PID/stat is
    read first (it takes no mmap_lock); one that started before the tag
    (its starttime, field 22) or is another user's is passed over, and only
    the rest are pidfd_open()ed and their environ read (which takes the
    process's mmap_lock: a process stuck in a page fault held up the scan
    of every process on the machine, under _ctrl_c_deferred)."""
    import signal as _signal
    want = tag.encode()
    key = ARM_TAG_VAR.encode() + b"="
    try:
        since = int(tag.split(".")[1])     # (when the tag was made: _tagged_env)
    except (IndexError, ValueError):
        since = 0
    uid = os.getuid()
    left: List[str] = []
    me = os.getpid()
    end = time.monotonic() + _GONE_WAIT_S
    for _ in range(8):
        found = unread = 0
        # (pid, its pidfd or None, its starttime) of each process killed
        killed: List[Tuple[int, Optional[int], bytes]] = []
        try:
            pids = [int(d) for d in os.listdir("/proc") if d.isdigit()]
        except OSError:
            return left
        for pid in pids:
            if pid == me:
                continue
            stat = _proc_stat(pid)
            # (field 22 is stat[19]; a member of the group is the group kill's)
            if (stat is None or len(stat) < 20 or stat[0] in (b"Z", b"X")
                    or int(stat[19]) < since or (pgid is not None and int(stat[2]) == pgid)):
                continue
            try:
                if os.stat(f"/proc/{pid}").st_uid != uid:
                    continue
            except OSError:
                continue                    # (gone)
            fd: Optional[int] = None
            try:
                fd = os.pidfd_open(pid)     # (the pid cannot be another's meanwhile)
            except AttributeError:
                pass                        # (no pidfd: os.kill)
            except OSError as e:
                if e.errno != errno.ENOSYS:
                    continue                # (gone)
                # (a kernel before 5.3: os.kill, as without os.pidfd_open --
                # it was taken for gone, and no stray was ever killed)
            try:
                with open(f"/proc/{pid}/environ", "rb") as f:
                    environ = f.read()
                # (still the process whose stat was read: the pid not reused)
                again = _proc_stat(pid)
                # An empty environ with no environment set up (env_end, field
                # 51, still 0): the process is inside an exec, between its new
                # memory and its new stack -- Popen has returned by then (its
                # pipe closes at exec's point of no return), 5% of Popens read
                # at once under load -- or exiting.  Read again next round: it
                # was passed over as untagged, the scan ended and the process
                # outlived the arm (test_the_stray_scan_..._since_the_arm, 1
                # of ~12 under make test, once pids wrapped and the new one
                # came early in the scan).  (An `env -i` one has env_end set.)
                if (not environ and again is not None and again[0] not in (b"Z", b"X")
                        and again[19:20] == stat[19:20]
                        and (len(again) < 49 or again[48] == b"0")):
                    unread += 1
                tagged = (again is not None and again[19:20] == stat[19:20]
                          and any(e.startswith(key) and want in e[len(key):].split(b":")
                                  for e in environ.split(b"\0")))
                what = ""
                if tagged:
                    with open(f"/proc/{pid}/cmdline", "rb") as f:
                        what = f.read().replace(b"\0", b" ").strip().decode(errors="replace")
            except OSError:
                tagged = False
            if tagged:
                found += 1
                try:
                    if fd is not None:
                        _signal.pidfd_send_signal(fd, _signal.SIGKILL)
                    else:
                        os.kill(pid, _signal.SIGKILL)
                except OSError:
                    pass
                killed.append((pid, fd, stat[19]))
                fd = None                   # (closed once it is gone)
                desc = f"pid {pid} ({what[:80]})"
                if desc not in left:
                    left.append(desc)
            if fd is not None:
                os.close(fd)
        _wait_killed_gone(killed, end)
        if not found and not unread:
            break
        time.sleep(0.01)
    return left


def _wait_killed_gone(killed: List[Tuple[int, Optional[int], bytes]], end: float) -> bool:
    """Wait, until the time.monotonic() `end` at most, until each process
    killed -- (pid, its pidfd or None, its starttime: /proc/PID/stat field
    22) -- has run its exit (a zombie counts as gone, as in
    _wait_group_gone: its memory is given back by then); close the pidfds.
    With pidfds, poll() on them (a pidfd is readable once its process has
    exited): no fixed sleep, no scan; without, /proc/PID/stat every 2 ms.
    True when all are gone."""
    import select
    fds = [fd for _, fd, _ in killed if fd is not None]
    try:
        waiting = select.poll()
        for fd in fds:
            waiting.register(fd, select.POLLIN)
        alive = len(fds)
        while alive:
            ms = math.ceil((end - time.monotonic()) * 1000)
            if ms <= 0:
                break
            for fd, _ in waiting.poll(ms):
                waiting.unregister(fd)
                alive -= 1
    finally:
        for fd in fds:
            os.close(fd)

    def running(pid: int, start: bytes) -> bool:
        st = _proc_stat(pid)
        return (st is not None and len(st) >= 20 and st[19] == start
                and st[0] not in (b"Z", b"X"))
    others = [(pid, start) for pid, fd, start in killed if fd is None]
    while others and time.monotonic() < end:
        others = [(pid, start) for pid, start in others if running(pid, start)]
        if others:
            time.sleep(0.002)
    return alive == 0 and not others


def _strays_warning(label: str, strays: List[str]) -> str:
    return (f"{label}: killed {len(strays)} process(es) the arm started that had left its "
            f"process group and outlived it (setsid, a daemon): {', '.join(strays[:5])}"
            f"{', ...' if len(strays) > 5 else ''}")


# What the harness keeps of a process's output (it kept all of it, though it
# uses a tail: a command that wrote 300 MB made the harness's RSS some
# 600 MB).  stdout is an arm's JSON: more than STDOUT_LIMIT bytes of it
# (HEAPLAB_STDOUT_LIMIT when set: _stdout_limit) is no arm's -- the arm
# fails, saying so; the rest is read and dropped.  A series of 65536
# samples is some 2.7 MB of it: 40.4 bytes a sample, measured with
#   python3 -c "import heaplab,json,time; s=heaplab.Sampler(0.0001);
#   b=bytearray(100<<20); time.sleep(20); v=list(s.series()); t0=v[0][0];
#   x=[[(t-t0)/1e9,p,r,l] for t,p,r,l in v]; print(len(x), len(json.dumps(x)))"
# (15030 samples, 606657 bytes).  Of stderr, the first and the last
# STDERR_KEPT bytes are kept (the preloaded library's lines come first, a
# traceback last).
STDOUT_LIMIT = 32 * 1024 * 1024
#: the variable that sets the limit instead (bytes; a tool's variable, not an
#: option: options.c's tool_vars)
STDOUT_LIMIT_VAR = "HEAPLAB_STDOUT_LIMIT"


def _stdout_limit(environ: Optional[Mapping[str, str]] = None) -> int:
    """The bytes of an arm's stdout kept: HEAPLAB_STDOUT_LIMIT (a whole
    number of bytes, at least 4096) when set and not empty, else
    STDOUT_LIMIT.  ValueError naming the variable for another value."""
    v = (os.environ if environ is None else environ).get(STDOUT_LIMIT_VAR, "").strip()
    if not v:
        return STDOUT_LIMIT
    try:
        n = int(v)
    except ValueError:
        n = -1
    if n < 4096:
        raise ValueError(f"{STDOUT_LIMIT_VAR}={v!r}: expected a whole number of bytes, at least "
                         f"4096 (the bytes of an arm's stdout, its JSON, kept; unset: "
                         f"{STDOUT_LIMIT})")
    return n


STDERR_KEPT = 1024 * 1024


class _GroupRun:
    """A process started in a session (so a process group) of its own, its
    stdout and stderr read as it runs.  The process is waited for, not its
    pipes: a helper it started and left running (`subprocess.Popen(["sleep",
    "97"])`, a server) holds the pipes open, and communicate() waited for
    their end -- the whole timeout, and the arm's records were lost.  Once
    the process has ended its group is killed (what it started goes with
    it, as docs/harness.md promises) and what is left in the pipes is read,
    never waiting on a process that holds them past _DRAIN_S."""

    def __init__(self, cmd: List[str], env: Optional[Mapping[str, str]], cwd: Optional[str]
                 ) -> None:
        import selectors
        self.finished = False
        #: "pid N (command)" of the processes that had left the group and
        #: were killed when it ended (_kill_tagged)
        self.strays: List[str] = []
        #: "pid N (command)" of those still in the group when the process
        #: had ended by itself, killed with the group (_group_members)
        self.left: List[str] = []
        #: the bytes of stdout kept (_stdout_limit)
        self.limit = _stdout_limit()
        env, self.tag = _tagged_env(env)
        self.p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                                  cwd=cwd, start_new_session=True)
        _LIVE_GROUPS.add(self.p.pid)
        self.sel = selectors.DefaultSelector()
        self.bufs: Dict[int, List[bytes]] = {}
        #: bytes read from each pipe; those kept (STDOUT_LIMIT, STDERR_KEPT)
        self.seen: Dict[int, int] = {}
        self.kept: Dict[int, int] = {}
        self.head: bytes = b""          # stderr's first STDERR_KEPT bytes
        assert self.p.stdout is not None and self.p.stderr is not None
        self.out_fd, self.err_fd = self.p.stdout.fileno(), self.p.stderr.fileno()
        for f in (self.p.stdout, self.p.stderr):
            assert f is not None
            os.set_blocking(f.fileno(), False)
            self.sel.register(f.fileno(), selectors.EVENT_READ)
            self.bufs[f.fileno()] = []
            self.seen[f.fileno()] = self.kept[f.fileno()] = 0
        self.exit_fd: Optional[int] = None
        try:                      # woken by the exit itself (Linux 5.3+), else polled
            self.exit_fd = os.pidfd_open(self.p.pid)
            self.sel.register(self.exit_fd, selectors.EVENT_READ)
        except (AttributeError, OSError):
            self.exit_fd = None

    def _read(self, fd: int) -> None:
        try:
            data = os.read(fd, 1 << 16)
        except BlockingIOError:
            return
        if not data:                # end of file
            self.sel.unregister(fd)
            return
        self.seen[fd] += len(data)
        if fd == self.out_fd:
            if self.seen[fd] <= self.limit:
                self.bufs[fd].append(data)
                self.kept[fd] += len(data)
            elif self.kept[fd] > 4096:          # past it: its beginning kept, the rest dropped
                self.bufs[fd] = [b"".join(self.bufs[fd])[:4096]]
                self.kept[fd] = 4096
            return
        if len(self.head) < STDERR_KEPT:
            take = STDERR_KEPT - len(self.head)
            self.head += data[:take]
            data = data[take:]
        if data:                    # the tail: at most STDERR_KEPT bytes
            bufs = self.bufs[fd]
            bufs.append(data)
            self.kept[fd] += len(data)
            while self.kept[fd] - len(bufs[0]) >= STDERR_KEPT:
                self.kept[fd] -= len(bufs.pop(0))

    @property
    def stdout_over(self) -> bool:
        """More than self.limit bytes came on stdout (the rest dropped)."""
        return self.seen[self.out_fd] > self.limit

    def _pipes_open(self) -> bool:
        return any(k.fd != self.exit_fd for k in self.sel.get_map().values())

    def wait(self, until: float) -> bool:
        """Read the pipes until the process has ended (True) or the
        time.monotonic() `until` has passed (False)."""
        while self.p.poll() is None:
            left = until - time.monotonic()
            if left <= 0:
                return False
            # (at most an hour a select: epoll takes 2^31 ms at most, and a
            # timeout of 30 days -- or 1e300 s -- raised OverflowError, 'timeout
            # is too large', after the process had started; h42left, session 42)
            step = min(left, 3600.0) if self.exit_fd is not None else min(left, 0.02)
            for key, _ in self.sel.select(step):
                if key.fd != self.exit_fd:
                    self._read(key.fd)
        return True

    def finish(self, sig: int) -> None:
        """Kill the group (and the process, if it is still there), reap it
        and read what is left in the pipes (once: later calls do nothing)."""
        import signal as _signal
        if self.finished:
            return
        # (what it left running when it ended by itself: a wrapper that
        # starts the program and exits -- killed here without a word, where
        # the allocator arms said so; h42left, session 42)
        if self.p.poll() is not None:
            self.left = _group_members(self.p.pid)
        _kill_group(self.p.pid, sig)
        if sig == _signal.SIGKILL and self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        if sig == _signal.SIGKILL:
            _wait_group_gone(self.p.pid)
        # what left the group (setsid) goes too, before the pipes it may hold
        self.strays = _kill_tagged(self.tag, self.p.pid)
        if self.exit_fd is not None:
            self.sel.unregister(self.exit_fd)
            os.close(self.exit_fd)
            self.exit_fd = None
        end = time.monotonic() + _DRAIN_S
        while self._pipes_open():
            ready = self.sel.select(max(0.0, end - time.monotonic()))
            if not ready:
                break               # held open by a process outside the group
            for key, _ in ready:
                self._read(key.fd)
        self.sel.close()
        for f in (self.p.stdout, self.p.stderr):
            if f is not None:
                f.close()
        _LIVE_GROUPS.discard(self.p.pid)
        self.finished = True

    def output(self) -> Tuple[str, str]:
        """(stdout, stderr) as read so far, as text (_CHILD_TEXT): stdout's
        first self.limit bytes, stderr's first and last STDERR_KEPT (what
        was dropped between them said by a line)."""
        def text(b: bytes) -> str:
            return b.decode(_CHILD_TEXT["encoding"], _CHILD_TEXT["errors"])
        tail = b"".join(self.bufs[self.err_fd])
        dropped = self.seen[self.err_fd] - len(self.head) - len(tail)
        err = text(self.head) + (f"\n[heaplab: {dropped} bytes of stderr not kept]\n"
                                 if dropped > 0 else "") + text(tail)
        return text(b"".join(self.bufs[self.out_fd])), err


def _in_group(pgid: int) -> Dict[str, Any]:
    """Popen's arguments that start a process in group pgid (0: a new one)."""
    if sys.version_info >= (3, 11):
        return {"process_group": pgid}
    return {"preexec_fn": lambda: os.setpgid(0, pgid)}


def _group_members(pgid: int) -> List[str]:
    """'pid N (its command line)' of each live process of group pgid but its
    leader (/proc; [] without it): what a command left running in its group
    (_GroupKeeper's command arm, _GroupRun's arm form)."""
    out = []
    try:
        pids = [int(n) for n in os.listdir("/proc") if n.isdigit()]
    except OSError:
        return []
    for pid in sorted(pids):
        if pid == pgid:
            continue
        fields = _proc_stat(pid)
        try:
            if fields is None or int(fields[2]) != pgid or fields[0] == b"Z":
                continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                what = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, IndexError, ValueError):
            continue
        out.append(f"pid {pid} ({what[:80]})")
    return out


# A SIGKILLed process is gone only once it has run its exit: one tearing down
# 1 GiB of memory was still running ('R') 35 ms after the kill here.  What the
# harness kills when an arm ends -- what the command left in its group --
# must be gone when the arm returns: its caller's next arm measures the
# machine, a test checks it (a `sleep 30` of the group seen alive right after
# run_command_arm returned, under make test's load; session 44).  At most
# _GONE_WAIT_S (a process stuck in the kernel, 'D', may take longer: the arm
# returns then, as before).
_GONE_WAIT_S = 10.0


def _wait_group_gone(pgid: int) -> None:
    """Wait (at most _GONE_WAIT_S) until group pgid has no live member but its
    leader (_group_members: a zombie counts as gone)."""
    end = time.monotonic() + _GONE_WAIT_S
    while _group_members(pgid) and time.monotonic() < end:
        time.sleep(0.002)


def _left_running_warning(label: str, returncode: Optional[int], left: List[str],
                          why: str) -> str:
    """The warning of a command that ended by itself and left processes it
    started running in its group, killed then -- the one wording of both
    forms of run_command_arm; `why` says what that means for the arm."""
    return (f"{label}: the command ended ({_exit_text(returncode)}) and left {len(left)} "
            f"process(es) it started running: {', '.join(left[:5])}"
            f"{', ...' if len(left) > 5 else ''}: killed -- {why}")


class _GroupKeeper:
    """A process group whose id stays this process's to signal: its leader
    is a `sleep` that only end() kills and reaps.  A group named by the pid
    of a command that may be reaped before it is signalled (a command arm:
    ctl.alive() polls it) could, once empty, have that pid reused by an
    unrelated session leader -- whose group the SIGKILL then hit."""

    def __init__(self) -> None:
        # (a group of this session: a process may join a group of its own
        # session only -- and a new group is not the terminal's foreground,
        # which a terminal's Ctrl-C reaches)
        self.p = subprocess.Popen(_dies_with_this_thread(["sleep", "infinity"]),
                                  env=_wrapper_env(None),
                                  stdin=subprocess.DEVNULL,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  **_in_group(0))
        _LIVE_GROUPS.add(self.p.pid)

    def join(self) -> Dict[str, Any]:
        """Popen's arguments that start a process in the group."""
        return _in_group(self.p.pid)

    def members(self) -> List[str]:
        """'pid N (its command line)' of each process in the group but the
        keeper (/proc; [] without it)."""
        return _group_members(self.p.pid)

    def end(self) -> None:
        """Kill (SIGKILL) what is left in the group, the keeper last reaped."""
        import signal as _signal
        _kill_group(self.p.pid, _signal.SIGKILL)
        self.p.wait()
        _wait_group_gone(self.p.pid)
        _LIVE_GROUPS.discard(self.p.pid)


# the process groups of _GroupRun's processes still running: killed when this
# interpreter exits (a sweep's worker stopped while a task ran -- its tasks'
# groups are sessions of their own, out of reach of the terminal's Ctrl-C)
_LIVE_GROUPS: Set[int] = set()


def _kill_live_groups() -> None:
    import signal as _signal
    for pgid in list(_LIVE_GROUPS):
        _kill_group(pgid, _signal.SIGKILL)


atexit.register(_kill_live_groups)


# How run_in_group starts a command: the process dies with the thread that
# started it (Linux's PR_SET_PDEATHSIG, kept across exec).  In a session of
# its own a sweep task's process is out of reach of the terminal's Ctrl-C,
# which stopped it when it shared its worker's group: it would outlive a
# local cluster's workers, stopped by that Ctrl-C (or a worker killed).  A
# command that cannot be started: "heaplab: cannot start PROG: ...", 127.
_PDEATHSIG_EXEC = """
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))   # PR_SET_PDEATHSIG
except Exception:
    pass
if os.getppid() != int(sys.argv[1]):
    os._exit(137)       # the parent is gone already
_lp = os.environ.pop("HEAPLAB_X_EXEC_LD_PRELOAD", None)
if _lp is not None:     # (this step ran without it: _wrapper_env)
    os.environ["LD_PRELOAD"] = _lp
try:
    os.execvp(sys.argv[2], sys.argv[2:])
except OSError as e:
    sys.stderr.write(f"heaplab: cannot start {sys.argv[2]}: {e.strerror}\\n")
    os._exit(127)
"""


def _dies_with_this_thread(cmd: Sequence[str]) -> List[str]:
    """cmd as started through _PDEATHSIG_EXEC: the process gets SIGKILL when
    the thread that starts it (and so this process) ends -- even by SIGKILL,
    which no handler sees.  Every process the harness starts goes through
    it: an arm's process (Experiment.run, run_command_arm), a command arm's
    command and its group keeper, spawn_arm's arm, a sweep's task.  (A
    SIGTERM to pytest left E6's unbounded arm spinning at the map limit,
    reparented to init, E5's arm -- in a session of its own -- running, E9's
    redis-server and its `sleep infinity` keeper.)  A program that cannot
    be started exits 127, its stderr saying why ("heaplab: cannot start
    PROG: ...")."""
    return [sys.executable, "-I", "-S", "-c", _PDEATHSIG_EXEC, str(os.getpid()), *cmd]


def _wrapper_env(env: Optional[Mapping[str, str]]) -> Optional[Mapping[str, str]]:
    """The environment to start _PDEATHSIG_EXEC with for a command that gets
    env: its LD_PRELOAD held back (HEAPLAB_X_EXEC_LD_PRELOAD) and put back
    just before the exec.  The Python step ran under the command's
    allocator otherwise (a command arm on jemalloc or heaplab: CPython's
    start-up on it, in the pid the harness samples)."""
    base = os.environ if env is None else env
    if "LD_PRELOAD" not in base:
        return env
    out = dict(base)
    out["HEAPLAB_X_EXEC_LD_PRELOAD"] = out.pop("LD_PRELOAD")
    return out


def _wait_for_exec(proc: subprocess.Popen, limit_s: float = 10.0) -> None:
    """Wait until proc has left _PDEATHSIG_EXEC for its command (or ended):
    its /proc/PID/cmdline no longer the wrapper's.  A sampler started before
    saw the wrapper's Python (~9 MB) as the command's footprint, and its
    first phase's figures were the wrapper's.  Not at all where /proc cannot
    show proc (_proc_mismatch: the sampler says so, the arm's error): in a
    pid namespace without its own /proc, /proc/PID was another process --
    pid 2, the host's kthreadd, whose empty cmdline reads as an exec under
    way -- and every arm waited out limit_s."""
    if _proc_mismatch() is not None:
        return
    wrapper = "\0".join([sys.executable, "-I", "-S", "-c", _PDEATHSIG_EXEC]).encode()
    deadline = time.monotonic() + limit_s
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            with open(f"/proc/{proc.pid}/cmdline", "rb") as f:
                line = f.read()
        except OSError:
            return
        # (empty while an exec is under way: Popen returns as the wrapper's
        # own exec closes its pipe, before the new image's arguments exist)
        if line and not line.startswith(wrapper):
            return
        time.sleep(0.0005)


def run_in_group(cmd: List[str], env: Dict[str, str], cwd: Optional[str], timeout: float
                 ) -> Tuple[Optional[int], str, str]:
    """Run cmd in a process group of its own (_GroupRun) until it ends or
    `timeout` seconds pass; then its group is killed.  Returns (returncode,
    stdout, stderr) -- returncode None when it was still running at the
    timeout.  The process dies with the thread that called this
    (_PDEATHSIG_EXEC).  What the sweep's tasks run through."""
    import signal as _signal
    run = None
    try:
        with _ctrl_c_deferred():      # (a Ctrl-C in the spawn: the process is stopped)
            run = _GroupRun(_dies_with_this_thread(cmd), _wrapper_env(env), cwd)
        ended = run.wait(time.monotonic() + timeout)
    finally:
        if run is not None:
            with _ctrl_c_deferred():
                run.finish(_signal.SIGKILL)
    out, err = run.output()
    if run.stdout_over:
        err += f"heaplab: {_stdout_over(run)}\n"
    if run.strays:
        err += "heaplab: " + _strays_warning(" ".join(map(str, cmd[:3])), run.strays) + "\n"
    return (run.p.returncode if ended else None), out, err


def _arm_document(out: Optional[str]) -> Optional[Dict[str, Any]]:
    """An arm's JSON read from its stdout, or None when that is none."""
    try:
        data = json.loads(out or "")
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("records"), list):
        return None
    return data


def _run_arm_process(cmd: List[str], env: Dict[str, str], cwd: Optional[str], timeout: float,
                     label: str) -> subprocess.CompletedProcess:
    """Run an arm's process to its end (stdout, stderr captured) in a process
    group of its own, so that what it starts is stopped with it: once the
    process has ended, its group is killed (a helper it left running held
    its pipes, and the arm waited for them until the timeout and lost its
    records).  Past the timeout: the group is killed, ArmFailed.  Ctrl-C
    (KeyboardInterrupt here): SIGINT to the group -- the arm ends its phase
    ('raised: KeyboardInterrupt') and prints its records --
    _INTERRUPT_GRACE_S for that (a second Ctrl-C cuts it short), then
    SIGKILL to whatever is left of the group, and ArmInterrupted with the
    partial JSON."""
    import signal as _signal
    run = None
    try:
        # a Ctrl-C in the spawn is handed over once the process is known
        # (then it is stopped as below): inside Popen it lost the process,
        # which ran on unsignalled, its earlier record kept
        with _ctrl_c_deferred():
            run = _GroupRun(_dies_with_this_thread(cmd), _wrapper_env(env), cwd)
        ended = run.wait(time.monotonic() + timeout)
        with _ctrl_c_deferred():      # (a Ctrl-C here: the arm's record says interrupted)
            run.finish(_signal.SIGKILL)
    except BaseException as e:      # Ctrl-C, or anything else: stop the arm first
        if run is None:
            raise                   # (nothing was started)
        p = run.p
        if not run.finished:
            _kill_group(p.pid, _signal.SIGINT)
            try:
                run.wait(time.monotonic() + _INTERRUPT_GRACE_S)
            except BaseException:       # a second Ctrl-C
                pass
            with _ctrl_c_deferred():      # (a third one: the group is still killed, reaped)
                run.finish(_signal.SIGKILL)
        if not isinstance(e, KeyboardInterrupt):
            raise
        out, err = run.output()
        data = _arm_document(out)
        if data is not None:
            _add_process_output(data, label, p.returncode, err, run.strays)
        msg = f"{label}: interrupted (KeyboardInterrupt): the arm's process was stopped"
        if data is not None:
            data["interrupted"] = True
            data["error"] = msg + (f"\n{data['error']}" if data.get("error") else "")
        raise ArmInterrupted(msg, data) from None
    p = run.p
    if not ended:
        msg = f"{label}: no result within {timeout} s"
        out, err = run.output()
        data = _arm_document(out)
        if data is not None:
            # it wrote its JSON and did not end (a command arm's, or what
            # holds an arm's process past its result): its records are kept
            msg += (" (the process was still running after it had written its JSON: "
                    "killed; its records are kept)")
            data["error"] = msg + (f"\n{data['error']}" if data.get("error") else "")
            _add_process_output(data, label, p.returncode, err, run.strays)
        raise ArmFailed(msg, data)
    out, err = run.output()
    done = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    done.strays = run.strays        # type: ignore[attr-defined]
    done.left = run.left            # type: ignore[attr-defined]
    done.stdout_over = _stdout_over(run) if run.stdout_over else None  # type: ignore
    return done


def _stdout_over(run: _GroupRun) -> str:
    return (f"the process wrote {run.seen[run.out_fd]} bytes on stdout, more than an arm's JSON "
            f"may hold ({run.limit} bytes: {STDOUT_LIMIT_VAR}, else "
            f"heaplab.harness.STDOUT_LIMIT; {STDOUT_LIMIT_VAR}=BYTES keeps more): the rest was "
            f"dropped")


def _add_process_output(data: Dict[str, Any], label: str, returncode: Optional[int],
                        stderr: Optional[str], strays: List[str],
                        left: Sequence[str] = ()) -> None:
    """The arm's record of its process: its `returncode`, `stderr_tail` (the
    last 2000 characters of stderr), the processes that had left its
    group and were killed (_add_strays) and those it left running in its
    group when it ended by itself, killed with the group (`left`)."""
    data["returncode"] = returncode
    data["stderr_tail"] = (stderr or "")[-2000:]
    _add_strays(data, label, strays)
    if left:
        if not isinstance(data.get("warnings"), list):
            data["warnings"] = []
        data["warnings"].append(_left_running_warning(
            label, returncode, list(left),
            "its records are the arm's own process's, and what they did after it ended was "
            "cut short (a wrapper that starts the arm and exits: run the arm itself)"))


def _add_strays(data: Dict[str, Any], label: str, strays: List[str]) -> None:
    """The arm's record says which processes that had left its group were
    killed (its `warnings`)."""
    if strays:
        if not isinstance(data.get("warnings"), list):
            data["warnings"] = []
        data["warnings"].append(_strays_warning(label, strays))


def _command(cmd: Any) -> List[str]:
    """cmd as an argv list: a non-empty sequence of strings (or paths), not
    one string (Popen would take "sleep 1" as a program's name)."""
    if isinstance(cmd, (str, bytes)) or not isinstance(cmd, Sequence):
        raise TypeError(f"run_command_arm: cmd must be a list of arguments (['prog', 'arg'...]), "
                        f"not {type(cmd).__name__}" + (f" {cmd!r}" if isinstance(cmd, str) else ""))
    if not cmd:
        raise ValueError("run_command_arm: cmd is empty (no program to run)")
    bad = [a for a in cmd if not isinstance(a, (str, bytes, os.PathLike))]
    if bad:
        raise TypeError(f"run_command_arm: every argument of cmd must be a string or a path, "
                        f"not {bad[0]!r}")
    return [os.fspath(a) for a in cmd]


def _positive(name: str, value: Any) -> float:
    """A number of seconds, > 0 (0 or less gave an instant timeout, or a
    sampler that never slept)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if not value > 0 or value != value or value == float("inf"):
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def _signal_number(value: Any) -> int:
    import signal as _signal
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"stop_signal must be a signal number (signal.SIGTERM) or None, not "
                        f"{type(value).__name__}")
    try:
        return int(_signal.Signals(value))
    except ValueError:
        raise ValueError(f"stop_signal {value}: not a signal of this system") from None


def _exit_text(returncode: Optional[int]) -> str:
    """'exit 3', or 'killed by SIGSEGV' for a negative return code."""
    import signal as _signal
    if returncode is not None and returncode < 0:
        try:
            return f"killed by {_signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit {returncode}"


# ---- any command on any allocator, sampled from outside ------------------------------

ALLOCATORS = ("heaplab", "glibc", "mimalloc", "jemalloc")
_PEER_LIBS = {
    "mimalloc": ("libmimalloc.so.2", "libmimalloc.so"),
    "jemalloc": ("libjemalloc.so.2", "libjemalloc.so"),
}
_LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib")


def _collected_only():
    from . import options
    return tuple(k for k, v in options().items() if v["collected_only"])


# The options the preloaded library's manual heap ignores when its environment
# gives them (hl_options_from_env): the collected-only ones, from the core's
# option table (heaplab.options()[name]["collected_only"], the heaps column of
# heaplab.h's HL_OPTIONS) -- a hand list of six here disagreed with the core's
# three and the launchers' five (the review of session 33).
PRELOAD_IGNORED_OPTIONS = _collected_only()


def allocator_env(allocator, options=None):
    """The environment that puts a command on `allocator` (see
    run_command_arm).  A peer's library must be installed (Debian's
    libmimalloc2.0 / libjemalloc2: tools/setup.sh); options are heaplab's."""
    if allocator not in ALLOCATORS:
        raise ValueError(f"allocator {allocator!r}: expected one of {', '.join(ALLOCATORS)}")
    if options and allocator != "heaplab":
        raise ValueError(f"allocator {allocator}: heaplab options {sorted(options)} apply to "
                         "allocator='heaplab' only")
    from . import InvalidArgument, preload_path, options as option_table
    if allocator in ("heaplab", "glibc"):
        path = preload_path()
        if " " in path or ":" in path:
            # ld.so splits LD_PRELOAD at spaces and colons: the pieces are no
            # files ("cannot be preloaded ... ignored"), and the command ran
            # on the system allocator, recorded as a heaplab arm
            raise InvalidArgument(f"allocator {allocator}: the preloaded library's path {path!r} "
                             f"holds a space or a colon, which LD_PRELOAD cannot name (ld.so "
                             f"splits it there): make a symlink to it from a path without "
                             f"them and set HEAPLAB_PRELOAD to that (docs/clients.md)")
        env = {"LD_PRELOAD": path}
        if allocator == "glibc":
            env["HEAPLAB_ALLOCATOR"] = "libc"
        known = option_table()
        for k, v in (options or {}).items():
            if k not in known:
                raise ValueError(f"option {k!r}: not a heaplab option")
            if k in PRELOAD_IGNORED_OPTIONS and allocator == "heaplab":
                # the preloaded heap is manual: it ignores these as
                # HEAPLAB_<NAME> variables (docs/clients.md), so an arm asking
                # for one measured the heap without it -- compact=always sent
                # the command to glibc before a818f6c, then did nothing
                raise ValueError(f"option {k!r}: the preloaded heap is a manual heap (a malloc), "
                                 f"which has no collector: it ignores every collected-only "
                                 f"option (heaplab.options()[{k!r}]['collected_only'], "
                                 f"PRELOAD_IGNORED_OPTIONS; docs/clients.md)")
            if isinstance(v, bool):
                v = "true" if v else "false"
            env["HEAPLAB_" + k.upper()] = _checked_option(k, str(v))
        return env
    for d in _LIB_DIRS:
        for name in _PEER_LIBS[allocator]:
            path = os.path.join(d, name)
            if os.path.exists(path):
                return {"LD_PRELOAD": path}
    raise ValueError(f"allocator {allocator}: {_PEER_LIBS[allocator][0]} is not installed "
                     "(tools/setup.sh bench)")


def _checked_option(name: str, text: str) -> str:
    """`text`, once the library takes it as option `name`'s value: the value
    the preloaded library will read as HEAPLAB_<NAME>, checked by the same
    C function (hl_options_set_value, as heaplab.Heap checks its options).
    A bad value made the preloaded library fall back to the system
    allocator (as it must for a program run under LD_PRELOAD), and the arm
    measured glibc as heaplab.  Raises heaplab.InvalidArgument (a
    ValueError) naming the option and the value."""
    _library_value(name, text)
    return text


def _library_value(name: str, text: str) -> Any:
    """Option `name`'s value as the library reads `text` (the string of its
    HEAPLAB_<NAME>): its own parser (hl_options_set_value), so suffixes,
    booleans and choices are read by the one definition of them; a bool, an
    int or a choice's name.  heaplab.InvalidArgument naming a bad value."""
    from . import _options_dict, _raise, _s
    from ._heaplab import ffi, lib
    if "\0" in text:
        raise ValueError(f"option {name}: {text!r} contains a NUL byte")
    opts = ffi.new("hl_options *")
    err = ffi.new("char[1024]")
    lib.hl_options_defaults(opts)
    raw = text.encode("utf-8", "surrogateescape")
    rc = lib.hl_options_set_value(opts, name.encode(), lib.HL_VALUE_STRING, 0, raw, len(raw),
                                  err, 1024)
    if rc:
        _raise(rc, _s(err))
    return _options_dict(opts)[name]


def _read_rollup(pid):
    """(rss, anonymous, lazyfree, swap) of a process in bytes, or None once
    it is gone.  A rollup that cannot be read -- a process that made itself
    non-dumpable (prctl(PR_SET_DUMPABLE, 0)) read by another user: EACCES --
    raises its OSError, which names the file: it was taken for "gone", and a
    live command's phases said 0 bytes with no error (the environment hunt,
    session 27)."""
    out = {"Rss:": 0, "Anonymous:": 0, "LazyFree:": 0, "Swap:": 0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                k = line.split(None, 1)[0]
                if k in out:
                    out[k] = int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        return None
    if not any(out.values()):
        return None     # a zombie's rollup is empty
    return out["Rss:"], out["Anonymous:"], out["LazyFree:"], out["Swap:"]


def _proc_mismatch() -> Optional[str]:
    """Why /proc cannot show this process's children, or None: a /proc of
    another pid namespace (unshare --pid without a /proc of its own) names
    other processes by the children's pids -- pid 2 there was the host's
    kthreadd, whose empty rollup read as "gone" -- and no /proc at all."""
    try:
        seen = os.readlink("/proc/self")
    except OSError as e:
        return f"/proc/self cannot be read ({e}): no /proc of this process"
    if seen != str(os.getpid()):
        return (f"/proc is another pid namespace's (/proc/self is pid {seen}, this process is "
                f"pid {os.getpid()}): /proc/PID would be another process")
    return None


class _OutsideSampler:
    """A thread sampling another process's footprint: peak, lowest, lowest
    after a mark, and the time series (every sample kept).  `error` is why
    the footprint could not be read (the first failure; None while every
    read worked): then the phases have no figures.  `proc` (the command's
    Popen): once it has been waited for, a reading is dropped -- its pid
    may be another process's by then."""

    def __init__(self, pid, interval_s, proc=None, lib=None):
        import threading
        self.pid = pid
        self.proc = proc
        self.lib = lib.encode() if lib else None   # looked for in the maps until seen
        self.lib_seen = False
        self.interval_s = interval_s
        self.lock = threading.Lock()
        self.error = _proc_mismatch()
        self.samples = []
        self.reset()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def reset(self):
        with self.lock:
            self.max_phys = self.max_rss = 0
            self.min_phys = None
            self.min_after_mark = None
            self.marked_ns = None
            self.phase_ns = time.monotonic_ns()
            self.count = 0
            self.last = None    # (stamp, fp) of the phase's last sample

    def mark(self):
        with self.lock:
            self.marked_ns = time.monotonic_ns()
            self.min_after_mark = None

    def sample(self):
        # a reading begun before a mark (or reset) goes in the series, not in
        # the window the mark opened: stored after it, a reading taken
        # mid-load was "the lowest after the mark" (the core's sampler had the
        # same fault: tests/c/sampler_windows_skip_reads_begun_before.c)
        begun = time.monotonic_ns()
        if self.error is not None:
            return None
        try:
            fp = _read_rollup(self.pid)
        except OSError as e:    # (it names the file and the errno)
            with self.lock:
                if self.error is None:
                    self.error = f"cannot read the command's footprint: {e}"
            return None
        if fp is None or (self.proc is not None and self.proc.returncode is not None):
            return None     # (gone; or reaped meanwhile: the pid may be reused)
        if self.lib is not None and not self.lib_seen:
            try:
                with open(f"/proc/{self.pid}/maps", "rb") as f:
                    seen = self.lib in f.read()
                if seen and (self.proc is None or self.proc.returncode is None):
                    self.lib_seen = True
            except OSError:
                pass
        rss, anon, lazy, swap = fp
        phys = anon + swap
        with self.lock:
            self.samples.append((begun, phys, rss, lazy))  # (stamped when it began)
            if begun >= self.phase_ns:
                if self.last is None or begun >= self.last[0]:
                    self.last = (begun, fp)
                self.count += 1
                self.max_phys = max(self.max_phys, phys)
                self.max_rss = max(self.max_rss, rss)
                self.min_phys = phys if self.min_phys is None else min(self.min_phys, phys)
            if self.marked_ns is not None and begun >= self.marked_ns:
                self.min_after_mark = phys if self.min_after_mark is None else \
                    min(self.min_after_mark, phys)
        return fp

    def _loop(self):
        while not self.stopping.is_set():
            self.sample()
            self.stopping.wait(self.interval_s)

    def summary(self):
        with self.lock:
            return {"max_phys": self.max_phys, "max_rss": self.max_rss,
                    "min_phys": self.min_phys, "min_after_mark": self.min_after_mark,
                    "samples": self.count, "last": self.last}

    def stop(self):
        self.stopping.set()
        self.thread.join()


class CommandPhase:
    """One named phase of a sampled command; use through CommandControl.phase()."""

    def __init__(self, ctl, name, whole_run=False):
        self.ctl = ctl
        self.name = name
        self.notes = {}
        self.marked = False
        self.entered = False
        # the one phase "run" of the form without a script: from the arm's
        # time 0, the sampler's readings since it started included
        self.whole_run = whole_run

    def __enter__(self):
        self.ctl._check_deadline()
        return _enter_phase(self, self.ctl, self._begin)

    def _reading(self):
        """The command's footprint now, or None: gone (or waited for -- its
        pid may be another process's), or not readable."""
        if self.ctl.proc.poll() is not None:
            return None
        return self.ctl.sampler.sample()

    def _begin(self):
        ctl = self.ctl
        # (the whole run: no reset -- the readings the sampler's thread took
        # before this phase began are the command's too, and were dropped: a
        # loaded machine took 40 ms to start that thread, a command of 0.1 s
        # ended with 0 or 1 of its samples in the phase -- session 31)
        if not self.whole_run:
            ctl.sampler.reset()
        fp = self._reading()
        self.t0 = ctl.t0 if self.whole_run else time.monotonic_ns()
        self.record = {
            "experiment": ctl.experiment, "arm": ctl.arm, "phase": self.name,
            "index": len(ctl.records), "t_start_s": (self.t0 - ctl.t0) / 1e9,
            "phys_before": None, "rss_before": None, "lazyfree_before": None,
            "anonymous_before": None, "resident_before": None,
        }
        # a command already gone has no "before": null, never 0 (the arm's
        # error says why when the footprint could not be read)
        if fp is not None and ctl.sampler.error is None:
            rss, anon, lazy, swap = fp
            self.record.update({"phys_before": anon + swap, "rss_before": rss,
                                "lazyfree_before": lazy, "anonymous_before": anon})
        return self

    def mark(self, label="event"):
        """Start the lowest-after-mark window now (e.g. just before a delete)."""
        self.ctl.sampler.mark()
        self.marked = True
        self.notes["mark"] = label
        self.notes["mark_s"] = (time.monotonic_ns() - self.ctl.t0) / 1e9

    def note(self, key, value):
        self.notes[_json_note(key, value)] = value

    def __exit__(self, exc_type, exc, tb):
        ctl = self.ctl
        ctl._in_phase = None
        fp = self._reading()
        summ = ctl.sampler.summary()
        t1 = time.monotonic_ns()
        if fp is None and summ["last"] is not None:
            # the command has exited (always so for the one phase `run` of
            # the form without a script, which ends when the command does):
            # "after" is its last sample in the phase, taken before it
            # exited, and notes' after_s says when (it read 0: the record
            # said the command gave everything back)
            stamp, fp = summ["last"]
            self.notes["after_s"] = (stamp - ctl.t0) / 1e9
        rss, anon, lazy, swap = fp if fp is not None else (None,) * 4
        r = self.record
        r.update({
            "t_end_s": (t1 - ctl.t0) / 1e9, "duration_s": (t1 - self.t0) / 1e9,
            "phys_after": None if fp is None else anon + swap, "rss_after": rss,
            "lazyfree_after": lazy, "anonymous_after": anon, "resident_after": None,
            "vmas_after": None,
            # no sample, no peak: null, never 0 (a /bin/true had phys_peak 0)
            "phys_peak": summ["max_phys"] if summ["samples"] else None,
            "phys_low": summ["min_phys"],
            "rss_peak": summ["max_rss"] if summ["samples"] else None,
            "phys_low_after_mark": summ["min_after_mark"] if self.marked else None,
            "samples": summ["samples"], "notes": self.notes,
            "status": _raised(exc_type, exc),
        })
        if ctl.sampler.error is not None:   # no figures, not 0 (the arm's error says why)
            for k in ("phys_before", "rss_before", "lazyfree_before", "anonymous_before",
                      "phys_after", "rss_after", "lazyfree_after", "anonymous_after",
                      "phys_peak", "phys_low", "rss_peak", "phys_low_after_mark"):
                r[k] = None
        with ctl._lock:
            if not ctl._closed:     # (a script left running past the timeout: no more records)
                ctl.records.append(r)
        return False


class CommandControl:
    """What a run_command_arm script receives: the running command's pid,
    phase(name), note(key, value), footprint() and wait_low(seconds)."""

    def __init__(self, proc, sampler, experiment, arm, deadline=None, timeout=None, t0=None):
        import threading
        self.proc = proc
        self.pid = proc.pid
        self.sampler = sampler
        self.experiment = experiment
        self.arm = arm
        self.records = []
        self.notes = {}
        # the arm's time 0: taken before the sampler's thread started (set
        # here, after it, the series began at negative times)
        self.t0 = time.monotonic_ns() if t0 is None else t0
        self.deadline = deadline          # time.monotonic() when the arm's timeout expires
        self.timeout = timeout
        self._lock = threading.Lock()
        self._expired = False
        self._closed = False
        self._in_phase = None     # the name of the phase in its with block

    def remaining(self):
        """Seconds left before the arm's timeout (0 once it has expired; None
        without one): bound the script's own blocking calls with it, e.g.
        subprocess.run(..., timeout=ctl.remaining())."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def _check_deadline(self):
        if self._expired or (self.deadline is not None and time.monotonic() >= self.deadline):
            self._expired = True
            raise ArmTimeout(f"the arm's timeout ({self.timeout:g} s) expired")

    def phase(self, name):
        """A phase (a context manager); ArmTimeout once the timeout expired."""
        self._check_deadline()
        return CommandPhase(self, _phase_name(name))

    def note(self, key, value):
        self.notes[_json_note(key, value)] = value

    def footprint(self):
        """(rss, anonymous, lazyfree, swap) now; None once the command is
        gone.  OSError (naming the file) when it cannot be read."""
        self._check_proc()
        return _read_rollup(self.pid)

    def _check_proc(self):
        if self.sampler.error is not None and self.sampler.error.startswith("/proc"):
            raise OSError(self.sampler.error)   # (/proc/PID is not the command)

    def alive(self):
        return self.proc.poll() is None

    def wait_low(self, seconds, settle_s=1.0):
        """Watch the footprint for up to `seconds` and return early once it
        has not gone lower for settle_s: the lowest value is what the
        sampler keeps (a phase's phys_low_after_mark), never a reading at a
        chosen instant.  It raises ArmTimeout when called after the arm's
        deadline, or when the deadline cuts it short; OSError (naming the
        file) when the footprint cannot be read."""
        self._check_deadline()
        self._check_proc()
        end = time.monotonic() + seconds
        if self.deadline is not None:
            end = min(end, self.deadline)
        low, low_t = None, time.monotonic()
        while time.monotonic() < end and self.alive() and not self._expired:
            fp = _read_rollup(self.pid)
            if fp is not None:
                phys = fp[1] + fp[3]
                if low is None or phys < low:
                    low, low_t = phys, time.monotonic()
                elif time.monotonic() - low_t >= settle_s:
                    break
            time.sleep(min(0.05, self.sampler.interval_s * 4))
        if self.deadline is not None and time.monotonic() >= self.deadline:
            self._check_deadline()      # cut short by the arm's timeout: ArmTimeout


def _async_raise(thread, exc_type):
    """Raise exc_type in `thread` at its next Python instruction (a thread
    blocked inside a C call -- a lock, a sleep, a read -- gets it only when
    that call returns)."""
    import ctypes
    if thread.ident is not None:
        ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread.ident),
                                                   ctypes.py_object(exc_type))


# how long a command is given to end after its stop signal (run_command_arm
# with an allocator) when the arm's deadline is nearer than that
_STOP_GRACE_S = 5.0

# how long a script's thread is given to unwind (its phases are recorded as
# they end) once the arm timed out or was interrupted
_SCRIPT_GRACE_S = 2.0
# ... of which it is given this long to stop on its own before an exception is
# raised in it
_SCRIPT_HEAD_START_S = 0.5


class _Finished:
    """The end of a script's thread, as run_command_arm waits for it: a lock
    the thread releases as its last step.

    Not Thread.join(): one interrupted by Ctrl-C marks the thread stopped in
    CPython 3.11 (bpo-45274) -- is_alive() False, every later join() at once
    -- so KeyboardInterrupt was never raised into a script still running.
    Not a threading.Event either: stop() may raise into the thread (with
    _async_raise) just as it ends, and Event.set() is Python code that takes
    the event's condition lock -- an exception landing right after that lock
    was taken (as Condition.__enter__ returns) left it held, and the
    caller's next wait blocked on it for ever.  `set` here is the lock's own
    release, a call straight into C: CPython looks for an exception raised
    into a thread after such a call, not inside it, so one lands before the
    release (in the script: recorded as its exception) or after it (the
    thread is done), never with a lock held."""

    def __init__(self):
        import _thread
        self._lock = _thread.allocate_lock()
        self._lock.acquire()
        self._seen = False
        self.set = self._lock.release     # (no Python frame between the thread and C)

    def wait(self, timeout):
        """True once the thread has ended; waits at most timeout s."""
        if not self._seen and self._lock.acquire(timeout=max(0.0, timeout)):
            self._seen = True
            self._lock.release()
        return self._seen


def _run_script(script, ctl, proc, deadline, timeout, label):
    """Run script(ctl) in a thread of its own and wait for it until the arm's
    deadline.  Returns None when it ended (its exception, if any, is raised
    here with its traceback), or the arm's error when the deadline came
    first: then the command is killed (a script blocked on it -- a client
    waiting for a dead server -- gets its answer), ArmTimeout is raised in
    the script's thread (unless it ends by itself within
    _SCRIPT_HEAD_START_S) and it is given _SCRIPT_GRACE_S in all to end; a thread
    blocked in a call that never returns (a sleep, a lock, a read of
    something else) cannot be stopped from outside and is left behind, said
    in the error.  A Ctrl-C while waiting does the same with
    KeyboardInterrupt and goes on as KeyboardInterrupt."""
    import threading
    box = {}
    done = _Finished()      # released as the script's thread ends: what is waited on

    def target():
        try:
            script(ctl)
        except BaseException as e:     # handed to the caller's thread
            box["exc"] = e
        finally:
            box["done"] = True      # (a plain store: no exception can land in it)
            done.set()

    t = threading.Thread(target=target, name=f"heaplab script: {label}", daemon=True)

    def stop(exc_type):
        ctl._expired = True
        if proc.poll() is None:
            proc.kill()
        if exc_type is not None:
            # a script in one of ctl's helpers stops on its own now (they see
            # _expired and raise ArmTimeout) and records its phase as it
            # unwinds: an exception raised into its thread meanwhile would
            # cut that record short, so it gets a moment first (the
            # fresh-clone CI lost a phase's record this way under load)
            done.wait(_SCRIPT_HEAD_START_S)
            if not box.get("done"):
                _async_raise(t, exc_type)
            done.wait(_SCRIPT_GRACE_S - _SCRIPT_HEAD_START_S)
        else:
            done.wait(_SCRIPT_GRACE_S)
        with ctl._lock:
            ctl._closed = True
        return not box.get("done")

    started = False
    try:
        with _ctrl_c_deferred():          # (inside Thread.start, it lost the thread)
            t.start()
            started = True
        done.wait(max(0.0, deadline - time.monotonic()))
    except BaseException:               # Ctrl-C (or anything else) while waiting
        if started:
            stop(KeyboardInterrupt)
        raise
    timed_out = isinstance(box.get("exc"), ArmTimeout)   # (a ctl helper saw the deadline)
    if not box.get("done") or timed_out:
        msg = f"the arm's timeout ({timeout:g} s) expired"

        class Expired(ArmTimeout):     # (raised in the thread as a class: its message here)
            def __init__(self, *args):
                super().__init__(*(args or (msg,)))
        Expired.__name__ = Expired.__qualname__ = "ArmTimeout"
        left = stop(Expired) if not box.get("done") else stop(None)
        return (f"{label}: the script was still running after the arm's timeout ({timeout:g} s): "
                f"the command was killed" +
                (f"; the script's thread did not stop within {_SCRIPT_GRACE_S:g} s (blocked in "
                 "a call that does not return) and was left running" if left else
                 ", the script stopped (ArmTimeout)"))
    if "exc" in box:
        raise box["exc"]
    return None


def _report_folder() -> Optional[str]:
    """Where a command arm's temporary folder (its HEAPLAB_STATS report) goes:
    the usual one (None), unless that path holds a '%'.  The preloaded
    library reads %p in HEAPLAB_STATS as the pid (and %% as %), the
    launchers take the path as it is -- a TMPDIR holding "%p" sent the
    preload's report elsewhere (report None, error None: the environment
    hunt, session 27), and doubling the '%' sent a launcher's there instead
    (the review) -- so such a TMPDIR is passed over for one the path means
    the same to both: /tmp, /var/tmp or /dev/shm."""
    import tempfile
    if "%" not in tempfile.gettempdir():
        return None
    for d in ("/tmp", "/var/tmp", "/dev/shm"):
        if os.path.isdir(d) and os.access(d, os.W_OK | os.X_OK):
            return d
    raise InvalidArgument(f"TMPDIR {tempfile.gettempdir()!r} holds a '%', which the preloaded "
                          f"library would read in the report's path, and none of /tmp, "
                          f"/var/tmp, /dev/shm can be written: set TMPDIR to a folder without one")


def _run_sampled_command(cmd, env, cwd, timeout, label, drop, allocator, script, experiment,
                         arm, options, interval_s, stop_signal):
    import signal as _signal
    import tempfile
    label = label or f"{allocator}: {' '.join(map(str, cmd))[:80]}"
    experiment = experiment or "command"
    arm = arm or allocator
    full_env = child_env(env, tuple(drop) + ("HEAPLAB_", "LD_PRELOAD"))
    full_env.update(allocator_env(allocator, options))
    static = _statically_linked(cmd, full_env, cwd) if allocator == "heaplab" else None
    with tempfile.TemporaryDirectory(dir=_report_folder()) as tmp:
        stats = os.path.join(tmp, "stats.json")
        if allocator == "heaplab":
            full_env["HEAPLAB_STATS"] = stats
        out_path, err_path = os.path.join(tmp, "stdout"), os.path.join(tmp, "stderr")
        # in a process group of its own: once the command has ended, what it
        # started and left running goes with it, as in the arm form (a
        # shell's `sleep 300 &` outlived an arm killed at its timeout, its
        # parent init).  The group is a keeper's (_GroupKeeper), not the
        # command's: the command is reaped as soon as it ends (ctl.alive()),
        # and a group named by its pid could then be someone else's.
        # The keeper, the command and the sampler's thread are started with
        # Ctrl-C held off (_ctrl_c_deferred) until each is kept where the
        # clean-up below finds it: one that landed inside a Popen or a
        # Thread.start lost what it had started (a keeper outliving this
        # process, a sampler's thread polling for ever, a zombie)
        keeper = proc = sampler = None
        # (its tag: what left the group is found and killed at the end)
        full_env, tag = _tagged_env(full_env)
        try:
            with _ctrl_c_deferred():
                keeper = _GroupKeeper()
                with open(out_path, "w") as out, open(err_path, "w") as err:
                    proc = subprocess.Popen(_dies_with_this_thread(cmd),
                                            env=_wrapper_env(full_env), cwd=cwd,
                                            stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                            **keeper.join())
                _wait_for_exec(proc)
                t0_ns = time.monotonic_ns()     # (before the sampler's first reading)
                sampler = _OutsideSampler(proc.pid, interval_s, proc, "libheaplab-malloc"
                                          if allocator == "heaplab" else None)
        except BaseException:
            with _ctrl_c_deferred():
                if proc is not None:
                    if proc.poll() is None:
                        proc.kill()
                    proc.wait()
                if keeper is not None:
                    keeper.end()
                _kill_tagged(tag, None)
                if sampler is not None:
                    sampler.stop()
            raise
        # from here on the command is stopped, waited for and its sampler
        # stopped whatever happens -- a script that raises, a Ctrl-C, a
        # second Ctrl-C while the command is given its grace time
        interrupted: Optional[BaseException] = None
        stopped = False     # the harness sent stop_signal (or killed it)
        started_at = time.monotonic()
        # (the start kept, not deadline - timeout: with timeout=1e300 that was
        # 0, and the arm's time said the machine's uptime)
        deadline = started_at + timeout
        try:
            ctl = CommandControl(proc, sampler, experiment, arm, deadline, timeout, t0_ns)
            data = {"experiment": experiment, "title": label, "arm": arm,
                    "session": session_info(), "started": _utc_now(),
                    "allocator": allocator, "options": options,
                    # (the caller's HEAPLAB_* are dropped: options= are the arm's)
                    "environment_options": {},
                    "params": {"command": list(map(str, cmd))}, "pid": proc.pid, "error": None,
                    "warnings": []}
            _announce("start", label, experiment=experiment)
            try:
                if script is None:
                    past_timeout = False
                    with CommandPhase(ctl, "run", whole_run=True):
                        try:
                            proc.wait(timeout=timeout)
                        except subprocess.TimeoutExpired:
                            past_timeout = True
                    if past_timeout:
                        # the whole run was the arm: killed at its timeout
                        # (it got the stop signal here and was killed 5 s
                        # later, while the error said "killed" at T s)
                        proc.kill()
                        stopped = True
                        data["error"] = (f"{label}: still running at the arm's timeout "
                                         f"({timeout:g} s): killed")
                else:
                    expired = _run_script(script, ctl, proc, deadline, timeout, label)
                    if expired is not None:
                        data["error"] = expired
                        stopped = True      # (killed by the harness)
            except KeyboardInterrupt as e:
                # Ctrl-C: the command goes now, the interrupt goes on (it
                # was recorded as the arm's error and swallowed)
                interrupted = e
                data["error"] = f"{label}: interrupted (KeyboardInterrupt): the command was killed"
            except BaseException:
                data["error"] = traceback.format_exc()
            signalled = False
            if proc.poll() is None and stop_signal is not None and interrupted is None:
                stopped = signalled = True
                proc.send_signal(stop_signal)
            if interrupted is None:
                # after the stop signal: until the arm's deadline, and at
                # least _STOP_GRACE_S; without one: until the deadline
                left = deadline - time.monotonic()
                wait_s = max(_STOP_GRACE_S, left) if signalled else max(0.0, left)
                try:
                    proc.wait(timeout=wait_s)
                except subprocess.TimeoutExpired:
                    if data["error"] is None:
                        at = time.monotonic() - started_at
                        data["error"] = (
                            f"{label}: still running {wait_s:.1f} s after the stop signal "
                            f"({_signal.Signals(stop_signal).name}): killed at {at:.1f} s (the "
                            f"arm's timeout: {timeout:g} s)" if signalled else
                            f"{label}: still running at the arm's timeout ({timeout:g} s): "
                            f"killed")
        finally:
            with _ctrl_c_deferred():      # (a Ctrl-C here: all of it stopped, then raised)
                if proc.poll() is None:
                    stopped = True
                    proc.kill()
                proc.wait()
                # (what the command started and left running when it ended
                # by itself: a wrapper that forks the program and exits --
                # the sampler followed the wrapper, the program was killed
                # here, and the arm was a measurement of nothing, no word)
                orphans = keeper.members() if not stopped else []
                keeper.end()
                sampler.stop()
                strays = _kill_tagged(tag, keeper.p.pid)
        if sampler.error is not None:
            msg = f"{label}: {sampler.error}: its phases have no figures"
            data["error"] = msg if not data.get("error") else f"{data['error']}\n{msg}"
        rc = proc.returncode
        if data["error"] is None and not stopped and rc not in (0, -(stop_signal or 0)):
            # it ended by itself, and not well (a crash, a failed start under
            # the preload): not a measurement of the program (a script may
            # stop it itself, with stop_signal or so that it exits 0)
            data["error"] = f"{label}: the command failed ({_exit_text(rc)})"
            if rc == 127:
                # (the wrapper's exec failed: "heaplab: cannot start PROG:
                # No such file or directory" was in stderr_tail only)
                why = [ln for ln in _file_ends(err_path, 0, 4000).splitlines()
                       if ln.startswith("heaplab: cannot start ")]
                if why:
                    data["error"] = f"{label}: {why[-1].removeprefix('heaplab: ')}"
        _announce("end", label, seconds=time.monotonic() - started_at,
                  ok=data["error"] is None, experiment=experiment)
        with ctl._lock:
            ctl._closed = True      # (a script's thread left running adds nothing now)
            data["records"] = list(ctl.records)
            data["notes"] = dict(ctl.notes)
        # in the order of their stamps (a reading is appended when it
        # completes, stamped when it began: the phases' own readings and the
        # sampler thread's interleaved out of order)
        data["series"] = [[(t - ctl.t0) / 1e9, p, r, lz]
                          for t, p, r, lz in sorted(sampler.samples, key=lambda x: x[0])]
        data["returncode"] = proc.returncode
        # (their ends only: a command's 300 MB of output was read whole)
        stderr = _file_ends(err_path, STDERR_KEPT)
        data["stderr_tail"] = stderr[-2000:]
        data["stdout_tail"] = _file_ends(out_path, 0, 8000)[-2000:]
        data["report"] = None
        data.setdefault("warnings", [])
        _add_strays(data, label, strays)
        if orphans:
            data["warnings"].append(_left_running_warning(
                label, rc, orphans,
                "only the command's own process is sampled, so the figures leave out what they "
                "did (a wrapper that starts the program and exits, a server that daemonizes: "
                "run the program itself, in the foreground)"))
        # the command's own report under its pid: written by a command that
        # took itself for a descendant of a process writing the same path
        # (a preloaded parent merely mapping the library did: report None,
        # silently -- the harness hunt, session 29)
        own = f"{stats}.{proc.pid}"
        if not os.path.exists(stats) and os.path.exists(own):
            data["warnings"].append(f"{label}: the command wrote its report as {own} (it took "
                                    f"itself for a descendant of a process writing the same "
                                    f"path): read from there")
            stats = own
        if os.path.exists(stats):
            with open(stats, "rb") as f:
                raw = f.read()
            try:
                data["report"] = json.loads(raw)
            except ValueError as e:
                # a report that is there but not JSON (cut short, or written
                # in a locale's number format: the environment hunt, session
                # 27) was dropped without a word: report None, error None
                at = getattr(e, "pos", 0) or 0
                msg = (f"{label}: the HEAPLAB_STATS report ({stats}, {len(raw)} bytes) is not "
                       f"JSON: {e}: {raw[max(0, at - 40):at + 40]!r}")
                data["error"] = msg if not data.get("error") else f"{data['error']}\n{msg}"
        # a phase of fewer than 2 samples is no measurement of it: said (a
        # /bin/true had an all-zero record, a short program one sample at
        # its exec, with no word -- the harness hunt, session 29)
        for r in data["records"]:
            if r.get("samples", 0) < 2 and sampler.error is None:
                data["warnings"].append(
                    f"{label}: phase {r['phase']!r}: {r.get('samples', 0)} sample(s): the command "
                    f"ended (or the phase did) before 2 samples were taken "
                    f"(interval_s={interval_s:g}): its figures are no measurement of it")
        # the command's own peak (VmHWM) beside the sampled one: a short
        # command's peak falls between samples
        rep = data["report"]
        data["report_peak_rss"] = rep.get("peak_rss") if isinstance(rep, dict) else None
        if allocator == "heaplab":
            _check_ran_on_heaplab(data, stderr, label, static)
            if data["report"] is None and not os.path.exists(stats) and sampler.lib_seen:
                # loaded, and no report: not an error -- a command that ends
                # by the exit_group system call itself, or through glibc's
                # own _exit, writes none (exit(), _exit(), _Exit() and
                # quick_exit() write it: dash's `sh -c`, os._exit) -- but
                # said, with its children's reports if any
                kids = sorted(f for f in os.listdir(tmp) if f.startswith("stats.json."))
                data["warnings"].append(
                    f"{label}: the preloaded library was loaded but wrote no HEAPLAB_STATS "
                    f"report: the command ended without exit() or _exit() (the exit_group system call "
                    f"made directly, glibc's own _exit) "
                    f"or {'was killed (' + _exit_text(rc) + ')' if rc is not None and rc < 0 else 'by a signal'}" +
                    (f"; its descendants wrote {len(kids)} report(s) of their own "
                     f"({', '.join(kids[:3])}{', ...' if len(kids) > 3 else ''}): the command "
                     f"is a wrapper, measured itself (docs/harness.md)" if kids else ""))
    if interrupted is not None:
        # the records so far, marked, as an Experiment arm's (an interrupted
        # E9 arm left no record: the caller had nothing to save)
        data["interrupted"] = True
        raise ArmInterrupted(data["error"], data) from interrupted
    return data


def _file_ends(path: str, head: int, tail: Optional[int] = None) -> str:
    """A file's first `head` and last `tail` (default: `head`) bytes as
    text, a line saying how much was left out between them."""
    tail = head if tail is None else tail
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size <= head + tail:
            raw = f.read()
            return raw.decode("utf-8", "replace")
        first = f.read(head)
        f.seek(size - tail)
        last = f.read(tail)
    return (first.decode("utf-8", "replace") +
            f"\n[heaplab: {size - head - tail} bytes not kept]\n" +
            last.decode("utf-8", "replace"))


def _statically_linked(cmd: List[str], env: Mapping[str, str], cwd: Optional[str]
                       ) -> Optional[str]:
    """The path of cmd's program when it is an ELF file without a program
    interpreter (statically linked: LD_PRELOAD does not reach it), else
    None -- also for a script, a program not found or not readable."""
    import shutil
    from . import _elf_header
    prog = cmd[0]
    if os.sep not in prog:
        found = shutil.which(prog, path=env.get("PATH", os.defpath))
        if found is None:
            return None
        prog = found
    elif cwd is not None:
        prog = os.path.join(cwd, prog)
    elf = _elf_header(prog)
    if elf is None or elf[1] is not None:
        return None
    # the dynamic loader itself has no interpreter either, and LD_PRELOAD
    # reaches what it runs (`ld-linux-x86-64.so.2 /bin/sh -c ...`: the review,
    # session 26): the loader this interpreter names
    mine = _elf_header(sys.executable)
    if mine is not None and mine[1] is not None and \
            os.path.realpath(prog) == os.path.realpath(mine[1]):
        return None
    return prog


def _check_ran_on_heaplab(data: Dict[str, Any], stderr: str, label: str,
                          static: Optional[str] = None) -> None:
    """An arm asked to run on heaplab whose command ran on the system
    allocator -- the preloaded library refused its set-up (a combination of
    options it does not take, a bad HEAPLAB_* given in env) and fell back,
    as it does for any program -- is not a heaplab run: its error says so.
    The report's allocator says where the command ran; without a report
    (a command killed before its exit), the library's line on stderr."""
    report = data.get("report")
    ran_on = report.get("allocator") if isinstance(report, dict) else None
    # the library never loaded: ld.so refused it (no report, normal exit),
    # or the program is statically linked (nothing said at all)
    refused = [ln.strip() for ln in stderr.splitlines()
               if "from LD_PRELOAD cannot be preloaded" in ln]
    if ran_on is None and (refused or static):
        msg = (f"{label}: asked for allocator heaplab, the command never ran on it: " +
               (refused[0] if refused else
                f"{static} is statically linked (LD_PRELOAD does not reach it: it ran on "
                f"its own malloc)"))
        data["error"] = msg if not data.get("error") else f"{data['error']}\n{msg}"
        return
    fell_back = [ln.strip() for ln in stderr.splitlines()
                 if ln.startswith("libheaplab-malloc: ") and "using the system allocator" in ln]
    if ran_on in (None, "heaplab") and not (ran_on is None and fell_back):
        return
    msg = (f"{label}: asked for allocator heaplab, the command ran on the system allocator "
           f"(the report's allocator: {ran_on!r})" if ran_on is not None else
           f"{label}: asked for allocator heaplab, the command ran on the system allocator")
    if fell_back:
        msg += f": {fell_back[0]}"
    data["error"] = msg if not data.get("error") else f"{data['error']}\n{msg}"


def environment_options(environ: Optional[Mapping[str, str]] = None,
                        set_by: Iterable[str] = ()) -> Dict[str, str]:
    """{option: value} of the HEAPLAB_<OPTION> variables in environ (this
    process's by default): libheaplab reads each as that option's default in
    every heap that does not set it -- so an option in `set_by` (what an arm
    sets itself, which wins) is left out.  By exact name (HEAPLAB_MODEL_SCALE
    is no HEAPLAB_MODE); the tools' variables (HEAPLAB_FAULT_*, HEAPLAB_BUILD,
    HEAPLAB_E1_FILL_MIB ...) are not options."""
    import heaplab
    environ = os.environ if environ is None else environ
    names = {"HEAPLAB_" + k.upper(): k for k in heaplab.options()}
    own = set(set_by)
    return {names[k]: v for k, v in sorted(environ.items())
            if k in names and names[k] not in own}


def _arm_env(extra: Optional[Mapping[str, str]] = None, who: Optional[str] = None
             ) -> Dict[str, str]:
    """The environment of an Experiment's arm: child_env(extra).  The
    caller's HEAPLAB_<OPTION> variables pass -- exporting one is how the suite
    runs under another collector (docs/experiments/e2.md) -- and each arm's
    record says so: its `environment_options` (_child_main).  An exported
    HEAPLAB_PAGE_RELEASE=false reached every arm and no record said so: E1's
    "on" arm ran with page release off and failed without a hint (the
    environment hunt, session 27).  `who` names the runner in the one line
    on stderr that says which ones."""
    env = child_env()
    env.update(extra or {})
    inherited = environment_options(env)
    if inherited and who:
        shown = ", ".join(f"HEAPLAB_{k.upper()}={v}" for k, v in inherited.items())
        print(f"heaplab: {who}: {shown} in the environment: the default of every arm's heap "
              f"that does not set it (each arm's record says which: environment_options)",
              file=sys.stderr)
    return env


def spawn_arm(path: str, exp_name: str, arm_name: str,
              env: Optional[Mapping[str, str]] = None) -> subprocess.Popen:
    """Start an arm in a fresh interpreter; returns the Popen (stdout = JSON).
    The caller's HEAPLAB_<OPTION> variables reach it and its record names
    them (_arm_env, environment_options)."""
    cmd = _dies_with_this_thread([sys.executable, "-m", "heaplab.harness", "child", path,
                                  exp_name, arm_name])
    _announce("spawn", f"{exp_name}/{arm_name}", experiment=exp_name)
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=_wrapper_env(_arm_env(env, f"{exp_name}/{arm_name}")),
                            **_CHILD_TEXT)


# The seeds' collector policies that E1-E6 study and that have since changed
# default: the trigger without gc_growth_ratio (gc_live_ratio alone, partial
# pages swept by quiet, pressure and backstop major sweeps only; docs/design.md,
# "The trigger"), and every cycle tracing the whole live set (no tenuring:
# "Tenuring in the default collector").  E1-E6 give them as their experiments' options
# (Experiment(..., options=SEED_POLICIES)), so every arm runs with them.
SEED_POLICIES: Dict[str, Any] = {"gc_growth_ratio": 0, "tenure_full_marks": 0}


def _check_save_folder(name: str) -> None:
    """ValueError, before anything runs, when experiment `name`'s records
    cannot be saved: the results folder (results_dir()) cannot be made or
    written, or its folder for the experiment is no folder or cannot be
    written.  (Found after the arm ran: HEAPLAB_RESULTS=/etc/passwd/sub ran
    the arm, then NotADirectoryError, the records lost.)"""
    import tempfile
    root = os.path.abspath(results_dir())
    where = (f"HEAPLAB_RESULTS={os.environ['HEAPLAB_RESULTS']!r}"
             if os.environ.get("HEAPLAB_RESULTS") else "./results ($HEAPLAB_RESULTS unset)")
    folder = os.path.join(root, name)
    try:
        for path in (root, folder):
            if os.path.exists(path) and not os.path.isdir(path):
                raise NotADirectoryError(20, "not a folder", path)
        os.makedirs(root, exist_ok=True)
        probe_in = folder if os.path.isdir(folder) else root
        fd, probe = tempfile.mkstemp(prefix=".heaplab-probe.", dir=probe_in)
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise ValueError(f"experiment {name}: its records cannot be saved under {root} "
                         f"({where}): {getattr(e, 'filename', None) or root}: "
                         f"{e.strerror or e} -- no arm was run (save=False runs without "
                         f"saving)") from None


class Experiment:
    """A named set of arms.  Declare arms with the @arm decorator in the
    experiment's own module; run() spawns one process per arm.

    options: heaplab.Heap options every arm gets unless it gives its own
    value (Experiment("E1", "page floor", options=SEED_POLICIES)).
    protocol: the ProtocolVariables its arms read (HEAPLAB_E1_FILL_MIB):
    run() checks them first (a ValueError naming a bad one, before any arm
    runs) and each arm's JSON records the values it ran with
    (params["protocol"], and "protocol_overridden" for those that are not
    the protocol's default).  An
    arm's options are its own followed by the experiment's it did not set:
    that is what the arm's function is called with, what its JSON and the
    sweeps see (arms[name]["options"])."""

    def __init__(self, name: str, title: str, seed: Optional[Dict[str, str]] = None,
                 options: Optional[Mapping[str, Any]] = None,
                 protocol: Sequence[ProtocolVariable] = ()) -> None:
        _name("experiment name", name)
        if not isinstance(title, str):
            raise TypeError(f"experiment {name}: title must be a string, not "
                            f"{type(title).__name__}")
        if seed is not None and not isinstance(seed, Mapping):
            raise TypeError(f"experiment {name}: seed must be a mapping, not "
                            f"{type(seed).__name__}")
        if options is not None and not isinstance(options, Mapping):
            raise TypeError(f"experiment {name}: options must be a mapping of option names "
                            f"to values, not {type(options).__name__}")
        if options is not None and not all(isinstance(k, str) for k in options):
            raise TypeError(f"experiment {name}: option names must be strings: "
                            f"{[k for k in options if not isinstance(k, str)]}")
        if isinstance(protocol, ProtocolVariable) or not all(
                isinstance(p, ProtocolVariable) for p in protocol):
            raise TypeError(f"experiment {name}: protocol must be a list of ProtocolVariable "
                            f"(the environment variables its arms read), not {protocol!r}")
        self.name = name
        self.title = title
        self.seed = seed or {}
        #: the protocol variables its arms read (ProtocolVariable): checked
        #: before the first arm runs, recorded in each arm's params["protocol"]
        self.protocol: List[ProtocolVariable] = list(protocol)
        self.options: Dict[str, Any] = dict(options or {})
        self.arms = {}
        self.path = None
        self.var = None

    def add_arm(self, arm_name: str, fn: ArmFn, params: Optional[Dict[str, Any]] = None,
                **options: Any) -> None:
        """Declare an arm: fn(rec, **params, **options) runs in the arm's own
        process; options are meant for heaplab.Heap, and the experiment's
        options the arm does not set are added after its own.  fn must be a
        module-level function of the module that holds this Experiment."""
        _name(f"experiment {self.name}: arm name", arm_name, folder=False)
        if not callable(fn):
            raise TypeError(f"experiment {self.name}: arm {arm_name!r}: fn must be a function "
                            f"fn(rec, **options), not {type(fn).__name__}")
        if params is not None and (not isinstance(params, Mapping)
                                   or not all(isinstance(k, str) for k in params)):
            raise TypeError(f"experiment {self.name}: arm {arm_name!r}: params must be a "
                            f"mapping of names to values, not {params!r}")
        if arm_name in self.arms:
            raise ValueError(f"experiment {self.name}: arm {arm_name!r} declared twice")
        check_arm_names(f"experiment {self.name}", [*self.arms, arm_name])
        merged = dict(options)
        merged.update((k, v) for k, v in self.options.items() if k not in options)
        self.arms[arm_name] = {"fn": fn, "options": merged, "params": dict(params or {})}
        if self.path is None:
            mod = sys.modules.get(fn.__module__)
            # (a module without a file -- an interactive session, python -c,
            # a notebook -- has none: run() says what is needed; add_arm
            # raised AttributeError "module '__main__' has no attribute
            # '__file__'")
            file = getattr(mod, "__file__", None)
            if file is not None:
                self.path = os.path.abspath(file)
            for k, v in (vars(mod).items() if mod is not None else ()):
                if v is self:
                    self.var = k

    def arm(self, arm_name: str, params: Optional[Dict[str, Any]] = None,
            **options: Any) -> Callable[[F], F]:
        """Decorator form of add_arm."""
        def deco(fn: F) -> F:
            self.add_arm(arm_name, fn, params, **options)
            return fn
        return deco

    def _locate(self) -> None:
        if not self.arms:
            raise ValueError(f"experiment {self.name} has no arms (declare them with "
                             f"@{self.var or 'experiment'}.arm(name, **options))")
        if self.path is None:
            first = self.arms[next(iter(self.arms))]["fn"]
            raise RuntimeError(
                f"experiment {self.name}: its arms are functions of module "
                f"{getattr(first, '__module__', '?')!r}, which has no file (an interactive "
                f"session, python -c, a notebook): each arm runs in a process of its own, which "
                f"imports the module from its file -- define the experiment and its arm "
                f"functions in a .py file, import it and call run()")
        if self.var is None:
            mod = sys.modules.get(self.arms[next(iter(self.arms))]["fn"].__module__)
            for k, v in vars(mod).items():
                if v is self:
                    self.var = k
        if self.var is None:
            raise RuntimeError(f"experiment {self.name} must be a module-level variable")

    def run(self, arms: Optional[Sequence[str]] = None, timeout: float = 600,
            env: Optional[Mapping[str, str]] = None, save: bool = True,
            repeat: Optional[int] = None) -> Dict[str, ArmResult]:
        """Run the arms (all by default), one fresh process each, in order.
        Returns {arm: ArmResult}; raises ArmFailed with the child's traceback.
        An arm whose repeats recorded different phases (repeats_mismatch)
        raises ArmFailed once every arm has run, naming the arm(s); the
        error's .results are the other arms' ArmResults (what run() would
        have returned without them) and its .repeats the runs of the arms
        that did not combine.

        repeat=N (default: $HEAPLAB_REPEAT, which `pytest --repeat N` sets,
        else 1) runs every arm N times, interleaved (off, on, off, on...),
        and returns for each arm the median of its N runs: every number of
        its records, stats and notes is the median across the repeats (lists
        and strings are the first run's; it has no footprint series and no
        phase start/end times, which belong to one run each), so an
        assertion on it is judged on the median of N.  The runs themselves
        are in ArmResult.repeats and saved as <arm>.r<k>.json."""
        if _IMPORTING_FOR_AN_ARM is not None:
            raise RuntimeError(
                f"experiment {self.name}: run() called while an arm's process imports "
                f"{_IMPORTING_FOR_AN_ARM}: that module runs its experiment when it is imported, "
                f"and every arm's process would run it again; call run() under "
                f"`if __name__ == \"__main__\":` (or from a test function)")
        self._locate()
        if save:        # (the arms ran, then the save failed: NotADirectoryError)
            _check_save_folder(self.name)
        n = repeat if repeat is not None else _env_repeat()
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"repeat must be an int, not {type(n).__name__}")
        if n < 1:
            raise ValueError(f"repeat={n}: expected >= 1")
        timeout = _positive("timeout", timeout)
        if env is not None and not isinstance(env, Mapping):
            raise TypeError(f"env must be a mapping of variable names to strings, not "
                            f"{type(env).__name__}")
        if arms is None:
            names = list(self.arms)
        elif isinstance(arms, str) or not isinstance(arms, Iterable):
            # ('on' ran arms 'o' and 'n')
            raise TypeError(f"arms must be a list of arm names, not {type(arms).__name__} "
                            f"{arms!r}")
        else:
            names = list(arms)
            if not names:
                raise ValueError(f"experiment {self.name}: arms=[]: no arm to run (None runs "
                                 f"them all)")
            unknown = [a for a in names if a not in self.arms]
            if unknown:
                raise ValueError(f"experiment {self.name}: no arm(s) {unknown} "
                                 f"(arms: {list(self.arms)})")
        runs: Dict[str, List[Dict[str, Any]]] = {a: [] for a in names}
        # the arms' whole environment, made here (drop=("",): run_command_arm
        # then adds nothing of this process's); the caller's HEAPLAB_<OPTION>
        # variables said once on stderr, and in each arm's record
        arm_env = _arm_env(env, f"experiment {self.name}")
        # the protocol's sizes, checked before the first arm (each arm reads
        # them again in its own process, from the same environment)
        protocol = protocol_values(self.protocol, arm_env)
        overridden = protocol_overridden(self.protocol, arm_env)
        # the experiment folder's lock (records_lock), held from this run's first
        # save to its last: another session running the same experiment at once
        # saved between them, and its single run was left beside this one's
        # --repeat files, taken for repeats of one run; now the second to save
        # waits (saying so) and its first save removes the first's files
        held = _RunLock(self.name)
        # (the pytest plugin's tables name an experiment whose arms started
        # and left no rows)
        _announce("experiment", self.name, experiment=self.name)
        try:
            for k in range(n):
                for arm_name in names:
                    cmd = [sys.executable, "-m", "heaplab.harness", "child", self.path, self.var,
                           arm_name]
                    label = f"{self.name}/{arm_name}" + (f" (repeat {k + 1}/{n})" if n > 1
                                                          else "")
                    try:
                        data = run_command_arm(cmd, arm_env, timeout=timeout, label=label,
                                               drop=("",))
                    except (ArmInterrupted, ArmFailed) as e:
                        # the arm's record says so (an earlier run's complete
                        # record of this arm must not stand for this one)
                        data = getattr(e, "data", None) or {
                            "experiment": self.name, "title": self.title, "arm": arm_name,
                            "options": self.arms[arm_name]["options"],
                            "environment_options": environment_options(
                                arm_env, set_by=self.arms[arm_name]["options"]),
                            "params": dict(self.arms[arm_name]["params"],
                                           **({"protocol": protocol} if self.protocol else {})),
                            **({"protocol_overridden": overridden} if self.protocol else {}),
                            "pid": None, "error": str(e), "records": [], "notes": {},
                            "series": [], "session": session_info()}
                        if isinstance(e, ArmInterrupted):
                            data["interrupted"] = True
                        data["seed"] = self.seed
                        if n > 1:
                            data["repeat"] = k
                        if save:
                            held.save(data, earlier_runs=k == 0)
                        raise
                    # a process that exits non-zero after its whole JSON (a crash
                    # at exit, an atexit handler's failure) is a failed arm: it was
                    # a good one here -- saved without an error, returned -- where
                    # a sweep's task of it is failed (the mutation audit, session 37)
                    # (an exit status it does not say -- a replaced run_command_arm's
                    # record, test_concurrent_results -- is no failure)
                    code = data.get("returncode")
                    if not data.get("error") and code is not None and code != 0:
                        data["error"] = (f"{label}: the arm's process "
                                         f"{_exit_text(code)} after it "
                                         f"wrote its arm JSON")
                    data["seed"] = self.seed
                    if n > 1:
                        data["repeat"] = k
                    if save:
                        held.save(data, earlier_runs=k == 0)
                    if data.get("error"):
                        raise ArmFailed(f"{self.name}/{arm_name} failed in its process:\n"
                                        f"{data['error']}")
                    runs[arm_name].append(data)
        finally:
            held.release()
        out = {}
        # an arm whose repeats recorded different phases cannot be combined;
        # the other arms' results are still whole (their files saved): the
        # error carries them (it raised from the first such arm, and every
        # arm's result was lost)
        mismatched: Dict[str, Tuple[str, List[ArmResult]]] = {}
        for arm_name, datas in runs.items():
            try:
                res = ArmResult(datas[0] if n == 1 else median_arm(datas))
            except ArmFailed as e:
                mismatched[arm_name] = (str(e), [ArmResult(d) for d in datas])
                continue
            res.repeats = [ArmResult(d) for d in datas]
            out[arm_name] = res
        if mismatched:
            why = "\n".join(m for m, _ in mismatched.values())
            kept = (f"the other arms' results are in this error's .results ({list(out)})"
                    if out else "no other arm's result")
            raise ArmFailed(f"{why}\n{kept}; the runs of {list(mismatched)} in its .repeats, "
                            f"and every run is saved as <arm>.r<k>.json",
                            results=out, repeats={a: r for a, (_, r) in mismatched.items()})
        return out


def _median(values: List[Any]) -> Any:
    nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    if len(nums) != len(values) or not nums:
        return values[0]
    import statistics
    m = statistics.median(nums)
    return int(m) if all(isinstance(v, int) for v in nums) and m == int(m) else m


def _median_dict(dicts: List[Dict[str, Any]], counts: Optional[Dict[str, int]] = None,
                 prefix: str = "", of: Optional[int] = None) -> Dict[str, Any]:
    """The median of N dicts key by key (a record's figures, stats, notes):
    each key over the dicts that have it, not null -- numbers their median,
    dicts key by key again, anything else (strings, lists, booleans) the
    value of the first that has it (the agreeing one when they agree).  A
    key only k of the `of` repeats have (k >= 1) is put in `counts` as
    prefix + key -> k ("stats.gc_ns", "notes.cycles"); one no repeat has is
    null.  (A key null in the first repeat took its null, one only later
    repeats had was left out.)"""
    of = len(dicts) if of is None else of
    out: Dict[str, Any] = {}
    keys: List[str] = []
    for d in dicts:
        keys.extend(k for k in d if k not in out and k not in keys)
    for key in keys:
        have = [d[key] for d in dicts if d.get(key) is not None]
        if not have:
            out[key] = None
            continue
        if len(have) < of and counts is not None:
            counts[prefix + str(key)] = len(have)
        if all(isinstance(v, dict) for v in have):
            # (a dict's keys count over the repeats that have the dict)
            out[key] = _median_dict(have, counts, f"{prefix}{key}.", len(have))
        else:
            out[key] = _median(have)
    return out


def collect_until_settled(heap: Any, limit: int = 32, major: Optional[bool] = None,
                          min_cycles: int = 2, trim: bool = False) -> int:
    """Collect until a collection gives nothing more back -- whole pages
    released, OS pages released inside partly live pages, pages evacuated --
    and return the collections run: at least min_cycles, at most limit;
    then one trim when trim is true.  major is Heap.collect's (None: the
    policy decides).  What an experiment waits on instead of
    a fixed sleep or count."""
    def given_back() -> Tuple[int, int, int]:
        s = heap.stats()
        return s.released_pages, s.subpage_released_bytes, s.evacuated_pages
    cycles, before = 0, given_back()
    while cycles < limit:
        heap.collect(major=major)
        cycles += 1
        now = given_back()
        if cycles >= min_cycles and now == before:
            break
        before = now
    if trim:
        heap.trim()
    return cycles


def arm_option(data: Mapping[str, Any], name: str) -> Any:
    """The value of heaplab option `name` an arm's heap ran with, from its
    arm JSON: the arm's own options (they win), else the environment a
    sweep gave the arm (HEAPLAB_<NAME>, from a --set grid or --env: the
    library's default for it), else the library's default.  What an
    experiment's arm_effects judges by -- data["options"] alone holds no
    grid value.  An environment value is read by the library's own parser
    (a ValueError naming a bad one)."""
    opts = data.get("options") or {}
    if name in opts:
        return opts[name]
    import heaplab
    table = heaplab.options()
    if name not in table:
        raise KeyError(f"{name}: not an option of heaplab")
    default = table[name]["default"]
    env = ((data.get("sweep") or {}).get("env") or {})
    raw = env.get("HEAPLAB_" + name.upper())
    if raw is None:
        return default
    return _library_value(name, str(raw).strip())


def repeats_mismatch(runs: Sequence[Tuple[Any, Mapping[int, str]]]) -> Optional[str]:
    """How the repeats of one arm fail to pair, or None when they pair.
    The rule every reader of repeats follows (median_arm; heaplab.analysis's
    wide(), phase-cost bars and report): the phases of the repeats pair by
    position -- phase k of each repeat with phase k of the others -- and
    phase k must have one name in all of them.  `runs` is (repeat label,
    {position: phase name}) per repeat; the answer names the first two
    repeats whose names differ at a position both have, with their phase
    sequences ("repeat 0 ['big', 'small'], repeat 1 ['small', 'big']").
    (A position only some repeats have is no mismatch here: median_arm
    refuses repeats of different lengths on its own, and the analysis
    drops failed phases' records.)"""
    runs = list(runs)
    for i, (label_a, a) in enumerate(runs):
        for label_b, b in runs[i + 1:]:
            if any(a[k] != b[k] for k in a.keys() & b.keys()):
                return (f"repeat {label_a} {[a[k] for k in sorted(a)]}, "
                        f"repeat {label_b} {[b[k] for k in sorted(b)]}")
    return None


def median_arm(datas: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """One arm JSON from N runs of the same arm: every number of the phase
    records (matched by position: the repeats must have recorded the same
    sequence of phase names, else ArmFailed naming the two sequences --
    repeats_mismatch, the rule heaplab report's tables follow too), their stats and notes, and the arm's
    notes is the median across the runs; anything else (strings, lists) is
    the first run's -- but a phase that raised in any run has that run's
    status ('raised: ...  (repeat k of N)'), and an arm error of any run is
    the median's.  "repeats" says how many there were.  Each record's
    "derived" holds the median of each run's own phys_growth,
    phys_peak_growth, phys_returned and resident_growth (derived_figures),
    what PhaseRecord's growth / peak_growth / returned and
    heaplab.analysis return for it: the same numbers as heaplab report's
    tables of the saved runs (a difference of medians was not).  A figure
    only some runs have (phys_low_after_mark and phys_returned of a phase
    marked in some of them, any figure null in some) is the median over
    those, and the record's "of_repeats" maps it to their count; one no
    run has stays null / out of "derived" (it was the first run's value or
    null, beside the others' medians).  Stats and notes too: one null or
    absent in some runs is the median over those that have it (anything
    but a number: the first of theirs), counted in "of_repeats" as
    "stats.<name>" / "notes.<key>" -- the arm's notes in the arm record's
    "of_repeats".

    The median record has no timeline: its "series" is [] and each phase's
    t_start_s / t_end_s is None (duration_s is the median duration).  Those
    belong to one run each -- the first run's series placed by median phase
    times put samples in the wrong phase, and duration_s was not t_end_s -
    t_start_s; heaplab.analysis reads an ArmResult of N runs as its
    ArmResult.repeats, as it reads their saved <arm>.r<k>.json files."""
    first = dict(datas[0])
    # phases pair by position, and only when each position has one name in
    # every repeat (a repeat that recorded 'small' before 'big' had its
    # 'small' averaged into the others' 'big')
    seqs = [(d.get("repeat", k), {i: r["phase"] for i, r in enumerate(d["records"])})
            for k, d in enumerate(datas)]
    mismatch = repeats_mismatch(seqs)
    if mismatch is None and any(len(d["records"]) != len(first["records"]) for d in datas):
        n = len(first["records"])
        mismatch = next(f"repeat {seqs[0][0]} {list(seqs[0][1].values())}, "
                        f"repeat {label} {list(names.values())}"
                        for label, names in seqs if len(names) != n)
    if mismatch is not None:
        raise ArmFailed(f"{first['experiment']}/{first['arm']}: the repeats recorded different "
                        f"phases ({mismatch}); repeats pair by position (phase k with phase k), "
                        "so they cannot be combined")
    counted = []
    for i in range(len(first["records"])):
        counts: Dict[str, int] = {}
        first_records = _median_dict([d["records"][i] for d in datas], counts)
        counted.append((first_records, counts))
    first["records"] = [r for r, _ in counted]
    for i, r in enumerate(first["records"]):
        r["t_start_s"] = r["t_end_s"] = None
        runs = [d["records"][i] for d in datas]
        # a phase that raised in any repeat raised (the strings were the
        # first run's: one that raised in repeat 2 only was 'ok')
        raised = [(k, phase_status(x)) for k, x in enumerate(runs) if phase_status(x) != "ok"]
        if raised:
            k, status = raised[0]
            r["status"] = status + (f" (repeat {k} of {len(runs)})" if len(runs) > 1 else "")
        # a figure some repeats lack (phys_low_after_mark of a phase not
        # marked in them): the median of those that have it, never the
        # first run's value (or null) beside the others' medians
        of_repeats = {}
        for f in FIGURES:
            have = [x[f] for x in runs if _real(x.get(f))]
            if have and len(have) < len(runs):
                r[f] = _median(have)
                of_repeats[f] = len(have)
        # a stat or a note null (or absent) in some repeats: the median (or
        # the agreeing value) over those that have it, and how many did --
        # it was the first repeat's value, null when that one had none
        of_repeats.update({k: n for k, n in counted[i][1].items()
                           if k.startswith(("stats.", "notes."))})
        # derived figures: each repeat's own, from its own parts, then the
        # median (as heaplab report's wide() takes them) over the repeats
        # that have it; a difference of medians is not the median difference
        derived = {}
        per_run = [derived_figures(x) for x in runs]
        for name in DERIVED_FIGURES:
            own = [f[name] for f in per_run if name in f]
            if own:
                derived[name] = _median(own)
                if len(own) < len(runs):
                    of_repeats[name] = len(own)
        if derived:
            r["derived"] = derived
        if of_repeats:
            r["of_repeats"] = of_repeats
    first["series"] = []
    errors = [d.get("error") for d in datas if d.get("error")]
    if errors and not first.get("error"):
        first["error"] = errors[0]
    note_counts: Dict[str, int] = {}
    first["notes"] = _median_dict([d.get("notes") or {} for d in datas], note_counts, "notes.")
    if note_counts:
        first["of_repeats"] = note_counts     # the arm's notes some repeats lack
    else:
        first.pop("of_repeats", None)
    first["repeats"] = len(datas)
    first.pop("repeat", None)
    return first


def write_atomic(path: str, text: Union[str, bytes]) -> None:
    """Write `text` (a str, or bytes written as they are) to `path` so that a reader -- or the file after a crash,
    a Ctrl-C, a full disk -- sees the old file or the new one, never half of
    one: into a temporary file in the same folder (.<name>.<pid>.<random>.tmp,
    made with the umask's permissions), flushed to disk, then os.replace().
    The temporary file is removed when the write fails; only a SIGKILL
    between its creation and the replace leaves one behind (hidden, and not
    *.json: load_arms never reads it).  Every writer of records uses it:
    save_arm, write_csv, the sweep's records and meta.json, the pytest
    plugin's tables, and the reports' CSV and PNG files (heaplab.analysis
    report and report_run).

    The folder is resolved once (os.path.realpath) and both the temporary
    file and the replace use that: a folder reached through a symbolic link
    that moves meanwhile (RESULTS/latest, re-pointed by a sweep starting)
    made the temporary file in one folder and the rename look for it in
    another (FileNotFoundError, the .tmp left behind).

    An OSError names `path` (a full disk's ENOSPC from write or fsync named
    no file at all: `heaplab report` said "[Errno 28] No space left on
    device", and a refused open named the hidden temporary file)."""
    folder = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    path = os.path.join(folder, os.path.basename(path))
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}."
                               f"{os.urandom(4).hex()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as e:
        raise OSError(e.errno, e.strerror, path) from e
    try:
        with (os.fdopen(fd, "wb") if isinstance(text, bytes) else
              os.fdopen(fd, "w", newline="")) as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError) and e.errno is not None:
            raise OSError(e.errno, e.strerror, path) from e
        raise


def arm_file_stem(arm: str) -> str:
    """The name an arm's files are saved under (<stem>.json, <stem>.r<k>.json;
    a sweep's records the same): its name with every character but letters,
    digits and -_.= made '_'.  Two arms of one experiment must differ in it
    (Experiment.add_arm and the sweeps refuse names that do not)."""
    return "".join(c if c.isalnum() or c in "-_.=" else "_" for c in arm)


def _arm_file_stem(data: Mapping[str, Any]) -> str:
    return arm_file_stem(data["arm"])


# The longest an arm's file name stem may be (bytes, arm_file_stem): its
# files are <stem>.r<k>.json, written through .<name>.<pid>.<random>.tmp
# (write_atomic), some 32 bytes more, and a file name has at most 255
# (NAME_MAX) -- an arm named 'x' * 300 ran, then its save failed
# "File name too long" and its records were lost.
ARM_NAME_MAX = 200


def check_arm_names(where: str, names: Sequence[str]) -> None:
    """ValueError when an arm is named twice, or two arms' files would be
    one (arm_file_stem: 'redis/on' and 'redis_on') -- one arm's records
    were then saved over the other's, and the other counted as run -- or
    an arm's file name would be too long (ARM_NAME_MAX)."""
    import re
    seen: Dict[str, str] = {}
    for a in names:
        stem = arm_file_stem(a)
        if len(stem.encode("utf-8", "surrogateescape")) > ARM_NAME_MAX:
            raise ValueError(f"{where}: arm {a[:40]!r}... ({len(stem.encode('utf-8', 'surrogateescape'))} "
                             f"bytes as a file name): an arm's name may be at most "
                             f"{ARM_NAME_MAX} bytes (heaplab.harness.ARM_NAME_MAX): its records "
                             f"are saved as <arm>.r<k>.json, and a file name has at most 255")
        if stem in seen:
            raise ValueError(f"{where}: arm {a!r} " + (
                "named twice" if seen[stem] == a else
                f"and arm {seen[stem]!r} would be saved to one file ({stem}.json): "
                f"name them apart"))
        seen[stem] = a
    # <arm>.r<k>.json is a repeat of <arm>: an arm 'x.r1' beside 'x' was
    # taken for one, and removed as an earlier run of 'x'
    for stem, a in seen.items():
        m = re.fullmatch(r"(.+)\.r\d+", stem)
        if m and m.group(1) in seen:
            raise ValueError(f"{where}: arm {a!r}'s file ({stem}.json) is the name of a repeat "
                             f"of arm {seen[m.group(1)]!r}: name them apart")


def _remove_earlier_runs(data: Mapping[str, Any], folder: Optional[str] = None,
                         keep: Optional[str] = None) -> List[str]:
    """Remove the saved runs of data's arm from an earlier Experiment.run --
    <arm>.json and every <arm>.r<k>.json but `keep` (the file name this run
    just saved) -- once this run has saved its first: they are this
    experiment's own outputs, and left beside this run's (an earlier
    --repeat 3, then 1 or 2) records.csv, load_arms and the reports took
    them for runs of this one.  Returns the paths removed."""
    import re
    folder = os.path.join(folder or results_dir(), data["experiment"])
    stem = _arm_file_stem(data)
    pattern = re.compile(re.escape(stem) + r"(\.r\d+)?\.json")
    removed = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        if pattern.fullmatch(name) and name != keep:
            path = os.path.join(folder, name)
            try:
                os.remove(path)
                removed.append(path)
            except OSError:
                pass
    return removed


def save_arm(data: Dict[str, Any], folder: Optional[str] = None) -> None:
    """Write an arm's JSON and rewrite the experiment's CSV (both whole, with
    write_atomic: a crash or Ctrl-C leaves the old file or the new one)."""
    _save_arm(data, folder)


def _save_arm(data: Dict[str, Any], folder: Optional[str] = None,
              earlier_runs: bool = False) -> None:
    """save_arm; with earlier_runs (Experiment.run, an arm's first save) the
    arm's files of an earlier run are removed AFTER this one is saved, and
    never the file being written: it was removed first and written again,
    so a reader in between (load_arms, a notebook, `heaplab report`) found
    no <arm>.json and was told to remove a file that was fine."""
    results = folder or results_dir()
    folder = os.path.join(results, data["experiment"])
    os.makedirs(folder, exist_ok=True)
    # (an arm JSON made by hand -- E6's observed arm -- is this session's too)
    data.setdefault("session", session_info())
    safe = _arm_file_stem(data)
    if data.get("repeat") is not None:
        safe += f".r{data['repeat']}"
    with records_lock(folder):
        write_atomic(os.path.join(folder, f"{safe}.json"), json.dumps(data))
        if earlier_runs:
            _remove_earlier_runs(data, results, keep=f"{safe}.json")
        _write_csv(folder)


@contextlib.contextmanager
def saving_interrupted(finish: Optional[Callable[[Dict[str, Any]], None]] = None,
                       save: bool = True) -> Iterator[None]:
    """Around a command-arm runner's run_command_arm: when the arm is
    interrupted (ArmInterrupted with its partial JSON), finish(data) -- the
    runner's own fields, its params -- and save_arm it (when `save`), then
    the interrupt goes on: an interrupted command arm (E9's redis arms) left
    no record, where an Experiment arm's says "interrupted": true."""
    try:
        yield
    except ArmInterrupted as e:
        if save and e.data is not None:
            if finish is not None:
                finish(e.data)
            save_arm(e.data)
        raise


def _waiting_for_records(who: str, folder: str) -> None:
    """Said once when a run's first save waits for the folder's run lock."""
    print(f"heaplab: {who}: waiting for another session running it to finish saving into "
          f"{folder} (its lock {RUN_LOCK} is held); this run's files then replace "
          f"that session's", file=sys.stderr, flush=True)


class _RunLock:
    """Experiment.run's hold of its experiment folders' run lock
    (records_lock(folder, RUN_LOCK)): taken at the run's first save into a
    folder, released when run() returns or raises (release()).  Another
    Experiment.run of the same experiment waits for it; a plain save_arm
    (another session's, or one from inside an arm) does not -- it takes only
    the records lock, around its own save.  (Holding the records lock itself
    from the first save to the last made such a save_arm wait silently for
    the whole run: an arm that saved hung until its timeout, the review of
    session 27.)"""

    def __init__(self, name: str) -> None:
        self.name = name
        self.stack = contextlib.ExitStack()
        self.folders: Set[str] = set()

    def save(self, data: Dict[str, Any], earlier_runs: bool) -> None:
        folder = os.path.join(results_dir(), data["experiment"])
        if folder not in self.folders:
            os.makedirs(folder, exist_ok=True)
            self.stack.enter_context(records_lock(
                folder, waiting=lambda: _waiting_for_records(f"experiment {self.name}",
                                                             folder), name=RUN_LOCK))
            self.folders.add(folder)
        _save_arm(data, earlier_runs=earlier_runs)

    def release(self) -> None:
        self.stack.close()


#: the hidden file in an experiment's folder that records_lock locks
RECORDS_LOCK = ".records.lock"
#: the one Experiment.run holds from its first save to its last (_RunLock)
RUN_LOCK = ".run.lock"


@contextlib.contextmanager
def records_lock(folder: str, waiting: Optional[Callable[[], None]] = None,
                 name: str = RECORDS_LOCK) -> Iterator[None]:
    """Hold the advisory lock of an experiment's folder (fcntl.flock,
    exclusive, on <folder>/.records.lock, made if missing): save_arm and
    write_csv take it around writing an arm's JSON and listing the folder
    for records.csv, so that two processes saving arms of one experiment
    at the same moment cannot leave a records.csv written from a listing
    that misses the other's arm (the last writer's stale listing won).
    Blocks until the lock is free; not re-entrant (a second records_lock
    of the same folder in one thread waits forever).  Without fcntl (not
    POSIX) it does nothing.  `waiting()` is called when the lock is held
    by another, before waiting for it.

    `name` RUN_LOCK is another file of the folder: Experiment.run holds
    that one from its first save to its last, so a second session running
    the same experiment at once waits at its first save until the first is
    done, then replaces the first's files (never are the two sessions'
    files left side by side as repeats of one run).  The file is opened
    read-only (flock needs no more): a results folder shared by two users
    stays usable by the one who did not make it."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if waiting is not None:
                waiting()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)           # (releases the lock)


#: what load_json_record returns for a file it skipped
SKIPPED = object()


def load_json_record(path: str, skipped: Optional[List[Tuple[str, str]]], caller: str) -> Any:
    """The JSON in the file `path`, for the readers of records (load_arms,
    heaplab.analysis.run_records, heaplab.sweep.complete_records).  A file
    that cannot be read or is not JSON (half written by an older heaplab,
    truncated, damaged) raises ValueError naming it and `caller` (the
    public function whose `skipped=[]` loads the others) -- unless
    `skipped` is a list: then (path, reason) is appended to it, a warning
    names the file and SKIPPED is returned."""
    try:
        # not blocking, and a regular file only: a FIFO named x.json held
        # `heaplab report` (and run --resume) in open() for good, no word
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with open(fd) as f:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise OSError("not a regular file: a "
                              + ("FIFO" if stat.S_ISFIFO(mode) else "socket"
                                 if stat.S_ISSOCK(mode) else "device or other special file"))
            return json.load(f)
    except (OSError, ValueError) as e:
        reason = (f"cannot be read ({e})" if isinstance(e, OSError) else
                  f"is not valid JSON ({e}): half written or damaged")
        if skipped is None:
            raise ValueError(f"{path}: {reason}; remove it, or pass skipped=[] to "
                             f"{caller} to load the others") from None
        import warnings
        # stacklevel 3: the line that called `caller`
        warnings.warn(f"heaplab: {path} {reason}: skipped", stacklevel=3)
        skipped.append((path, reason))
        return SKIPPED


def _real(v: Any) -> bool:
    """A finite int or float, not a bool."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def _session_id(data: Dict[str, Any]) -> Any:
    """The id of the pytest session or run an arm's JSON says it comes
    from (records.csv's session column), or None."""
    sess = data.get("session")
    return sess.get("id") if isinstance(sess, dict) else None


def _arm_problem(a: Dict[str, Any]) -> Optional[str]:
    """What makes a dict that claims to be an arm's JSON unreadable, or None:
    the fields write_csv, records_frame and the plots read (docs/harness.md,
    the arm's JSON) were found missing or of the wrong type only as a
    KeyError, TypeError or a numpy error deep inside them."""
    for key in ("experiment", "arm"):
        if key not in a:
            return f"no {key!r} (an arm's JSON has experiment, arm and records)"
        if not isinstance(a[key], str):
            return f"{key!r} is {type(a[key]).__name__} {a[key]!r}, expected a string"
    # (a repeat or a phase index of another type -- hand-edited, "1" or
    # true -- was read as another repeat of the arm, or a TypeError from
    # pandas' sort when mixed with the others' numbers)
    rep = a.get("repeat")
    if rep is not None and not (isinstance(rep, int) and not isinstance(rep, bool) and rep >= 0):
        return f"'repeat' is {rep!r:.60}, expected a whole number >= 0 (k of <arm>.r<k>.json)"
    recs = a.get("records")
    if not isinstance(recs, list):
        return f"'records' is {'null' if recs is None else type(recs).__name__}, expected a list"
    for i, r in enumerate(recs):
        if not isinstance(r, dict) or not isinstance(r.get("phase"), str):
            return f"record {i} is not a phase record (an object with a 'phase' name)"
        ix = r.get("index")
        if ix is not None and not (isinstance(ix, int) and not isinstance(ix, bool)):
            return (f"record {i} (phase {r['phase']!r}): 'index' is {ix!r:.60}, expected the "
                    f"phase's position, a whole number")
        for k in ("experiment", "arm"):
            if r.get(k) is not None and not isinstance(r[k], str):
                return (f"record {i} (phase {r['phase']!r}): {k!r} is {r[k]!r:.60}, "
                        f"expected a string")
        for k in (*FIGURES, "t_start_s", "t_end_s"):
            v = r.get(k)
            # (NaN and infinities are numbers here: a figure may be one)
            if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool)):
                return (f"record {i} (phase {r['phase']!r}): {k!r} is {v!r:.60}, "
                        f"expected a number or null")
        for k in ("stats", "notes"):
            if r.get(k) is not None and not isinstance(r[k], dict):
                return (f"record {i} (phase {r['phase']!r}): {k!r} is "
                        f"{type(r[k]).__name__}, expected an object")
        # an integer past a float's range (JSON has no bound): an
        # OverflowError traceback from every table
        for k, v in (*((k, r.get(k)) for k in FIGURES),
                     *((f"stats.{n}", v) for n, v in (r.get("stats") or {}).items()),
                     *((f"notes.{n}", v) for n, v in (r.get("notes") or {}).items())):
            if isinstance(v, int) and abs(v) > sys.float_info.max:
                return (f"record {i} (phase {r['phase']!r}): {k!r} is an integer of "
                        f"{len(str(abs(v)))} digits, past a float's range")
    series = a.get("series")
    if series is not None:
        if not isinstance(series, list):
            return f"'series' is {type(series).__name__}, expected a list of rows"
        for i, row in enumerate(series):
            if (not isinstance(row, (list, tuple)) or len(row) != 4
                    or not all(_real(v) for v in row)):
                return (f"series row {i} is {row!r:.80}, expected 4 numbers "
                        "[t_s, phys, rss, lazyfree]")
    return None


def load_arms(folder: str, skipped: Optional[List[Tuple[str, str]]] = None
              ) -> List[Dict[str, Any]]:
    """Every arm JSON under a results folder (recursively): the *.json files
    that hold an object with "arm" and "records" (other JSON -- meta.json,
    effects.json -- is not an arm and is passed over).

    A *.json file that cannot be read or is not JSON (half written by an
    older heaplab, truncated, damaged) raises ValueError naming it, so that
    a table is never silently short of an arm.  To load the others anyway,
    pass a list as `skipped`: each such file is appended to it as (path,
    reason) and left out, and a warning names it.

    Folders that are symbolic links are followed (an experiment's folder
    linked in from another run was left out without a word), each real
    folder once: a loop of links ends, and a run reached twice (RESULTS/latest
    beside RESULTS/<run>) is loaded once.

    A sweep's run folder (`heaplab run`'s RESULTS/<run-id>, it holds
    meta.json with a run_id) BELOW `folder` is not read: its task records
    (<run-id>/E1/c000/on.r0.json) are runs of a grid, not of the suite's
    arms, and were counted as repeats of results/E1/on.json
    (sweep_runs_under lists them; load_arms(RESULTS/<run-id>) still reads
    the run itself)."""
    return [data for _, data in _arm_files(folder, skipped, "load_arms")]


def _is_sweep_run(path: str) -> bool:
    """A sweep's run folder: its meta.json is heaplab run's (an object with
    a "run_id"; another meta.json beside arm files does not make one)."""
    if not os.path.isfile(os.path.join(path, "meta.json")):
        return False        # (a FIFO named meta.json: open() waited for good)
    try:
        with open(os.path.join(path, "meta.json")) as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return False
    return isinstance(meta, dict) and "run_id" in meta


def _runs_left_out(runs: List[str]) -> str:
    """The line saying which sweep run folders a folder's report left out."""
    return (f"left out {len(runs)} sweep run folder(s) (heaplab run's, with meta.json; "
            f"report each on its own: heaplab report {runs[0]}): {', '.join(runs)}")


def _no_arm_results(folder: str) -> str:
    """The error of a results folder in which load_arms found no arm
    (analysis.arms; heaplab report says it before it imports pandas when
    the folder holds no JSON at all: _holds_no_json)."""
    runs = sweep_runs_under(folder)
    return (f"{folder}: no arm results in this folder "
            "(expected <experiment>/<arm>.json files written by the harness)"
            + (f"; {_runs_left_out(runs)}" if runs else ""))


def _holds_no_json(folder: str) -> bool:
    """True when none of the folders load_arms reads under `folder` holds a
    *.json file: it can find no arm there, and no file need be read to say
    so (an empty folder, the wrong one)."""
    return not any(name.endswith(".json") for _, files in _arm_files_walk(folder)
                   for name in files)


def sweep_runs_under(folder: str) -> List[str]:
    """The sweep run folders (holding heaplab run's meta.json) below `folder` that
    load_arms(folder) leaves out, each real folder once (RESULTS/latest is
    one of the runs), in the order load_arms walks."""
    out: List[str] = []
    for _ in _arm_files_walk(folder, out):
        pass
    return out


def _arm_files_walk(folder: str, runs: Optional[List[str]] = None
                    ) -> Iterator[Tuple[str, List[str]]]:
    """(folder, its file names) of each folder load_arms reads, sweep run
    folders below `folder` left out (and appended to `runs`)."""
    seen = set()
    for root, dirs, files in os.walk(folder, followlinks=True):
        real = os.path.realpath(root)
        if real in seen:
            dirs[:] = []
            continue
        seen.add(real)
        dirs.sort()
        if root != folder and _is_sweep_run(root):
            dirs[:] = []
            if runs is not None:
                runs.append(root)
            continue
        yield root, files


def _arm_files(folder: str, skipped: Optional[List[Tuple[str, str]]], caller: str
               ) -> Iterable[Tuple[str, Dict[str, Any]]]:
    """(path, arm JSON) of each arm file under folder, as load_arms finds
    them.  What a folder may hold (docs/harness.md, *What a results folder
    holds*): the arms of the experiment it is named after.  An arm file of
    another experiment in it -- a copied E5/on.json in results/E4b/, whose
    rows records.csv, load_arms and the reports mixed into E4b's -- is left
    out with a warning naming it (and appended to `skipped` when that is a
    list): one whose experiment names none of the folders from `folder` down
    to it while one of those names the experiment of another arm file beside
    it.  (A folder named after no experiment -- bench.py's --results DIR --
    is taken as it is.)  Two files anywhere under `folder` with the same
    experiment, arm and repeat are both kept, and a warning names them: the
    rows would be told apart by nothing but the arm's session (the CSV's
    session column).  The check spans the whole walk, not one folder (a copy
    of results/XR as results/XR-before was read as three more repeats of
    every arm, their medians mixed, without a word)."""
    import warnings
    top = os.path.abspath(folder)
    seen: Dict[Tuple[str, str, Any], Tuple[str, Any]] = {}
    for root, files in _arm_files_walk(folder):
        rel = os.path.relpath(os.path.abspath(root), top)
        names = {os.path.basename(top)} | ({p for p in rel.split(os.sep) if p not in (".", "")})
        found: List[Tuple[str, Dict[str, Any]]] = []
        for name in sorted(files):
            if not name.endswith(".json"):
                continue
            path = os.path.join(root, name)
            data = load_json_record(path, skipped, caller)
            if isinstance(data, dict) and "records" in data and "arm" in data:
                found.append((path, data))
        experiments = {str(d.get("experiment")) for _, d in found}
        # the folder's experiment: a folder name on the way that is the
        # experiment of an arm file here
        own = names & experiments
        for path, data in found:
            exp = str(data.get("experiment"))
            if own and exp not in names:
                reason = (f"an arm of experiment {exp!r} in the folder of "
                          f"{' / '.join(sorted(own))}: not this folder's")
                warnings.warn(f"heaplab: {path}: {reason}: left out", stacklevel=3)
                if skipped is not None:
                    skipped.append((path, reason))
                continue
            # (the repeat's type in the key: a hand-edited `true` beside a
            # repeat 1 was "both repeat 1" before the record was refused)
            rep = data.get("repeat")
            key = (exp, str(data.get("arm")), (type(rep).__name__, rep))
            if key in seen:
                other, other_session = seen[key]
                apart = os.path.dirname(path) != os.path.dirname(other)
                # (records.csv's session column tells them apart only when both
                # arms carry a session -- bench.py's records carry none)
                told = (" (records.csv's session column tells them apart)"
                        if _session_id(data) and other_session else
                        " (nothing in records.csv tells them apart: not both carry a session)")
                warnings.warn(f"heaplab: {path} and {other} are both experiment {key[0]} arm "
                              f"{key[1]!r}" + (f" repeat {rep}" if rep is not None else "")
                              + (": a copy of the arm in another folder, read as more runs of "
                                 "it" if apart else ": two runs of one arm side by side")
                              + told + "; remove the one that is not wanted", stacklevel=3)
            else:
                seen[key] = (path, _session_id(data))
            yield path, data


#: the columns of records.csv: status is the phase's (phase_status), arm_error
#: its arm's error on one line (error_summary; '' when the arm did not fail);
#: an arm that failed with no phase record has one row, phase '', status
#: 'no phase records'
CSV_COLUMNS = ("experiment", "arm", "repeat", "phase", "status", "arm_error", *FIGURES,
               "session", "started")


def write_csv(folder: str, files: Optional[Sequence[str]] = None) -> None:
    """Write <folder>/records.csv (write_atomic): one row per phase of every
    arm JSON under it (CSV_COLUMNS), each with its arm's repeat (k of an
    <arm>.r<k>.json; empty for an arm run once), its phase's status and its
    arm's error.  A *.json file that is not valid JSON, or an arm's JSON
    that cannot be read (_arm_problem: "records" null, a figure that is not a
    number...), is left out with a warning naming it (load_arms(folder)
    raises on the first, heaplab.analysis on both).  `files`: the arm JSON
    files to take instead (paths), in that order -- the ones a reader of the
    folder other than load_arms takes (bench.py's: one file per arm,
    directly in the folder, as its table.txt and bench.ipynb read them: the
    CSV had the rows of a copy of an arm beside its own and of the runs
    kept in subfolders, which the table and notebook leave out, and a
    notebook's groupby counted both).  The listing and the write are done
    holding records_lock(folder)."""
    with records_lock(folder):
        _write_csv(folder, files)


def _write_csv(folder: str, files: Optional[Sequence[str]] = None) -> None:
    """write_csv, records_lock(folder) held by the caller."""
    import warnings
    rows = []
    taken: Iterable[Tuple[str, Any]] = (
        _arm_files(folder, [], "write_csv") if files is None else
        ((path, load_json_record(path, [], "write_csv")) for path in files))
    for path, data in taken:
        if data is SKIPPED:
            continue
        why = _arm_problem(data) if isinstance(data, dict) else "not a JSON object"
        if why:
            warnings.warn(f"heaplab: {path}: not an arm's results: {why}: left out of "
                          f"records.csv", stacklevel=2)
            continue
        arm_error = error_summary(data.get("error"))
        sess = data.get("session") if isinstance(data.get("session"), dict) else {}
        if arm_error and not data["records"]:
            # an arm that failed before any phase recorded: one row saying
            # so (it was no row at all -- the table short of the arm)
            rows.append({"experiment": data["experiment"], "arm": data["arm"],
                         "repeat": data.get("repeat"), "phase": "",
                         "status": "no phase records", "arm_error": arm_error,
                         "session": sess.get("id"), "started": data.get("started")})
        for r in data["records"]:
            row = {"experiment": r.get("experiment", data["experiment"]),
                   "arm": r.get("arm", data["arm"]), "repeat": data.get("repeat"),
                   "phase": r["phase"], "status": phase_status(r), "arm_error": arm_error,
                   "session": sess.get("id"), "started": data.get("started")}
            row.update({k: r.get(k) for k in FIGURES})
            rows.append(row)
    f = io.StringIO(newline="")
    w = csv.DictWriter(f, fieldnames=list(CSV_COLUMNS))
    w.writeheader()
    w.writerows(rows)
    write_atomic(os.path.join(folder, "records.csv"), f.getvalue())


def percent(fraction: float, digits: int = 1) -> str:
    """A fraction as the effects tables print it: '97.3%'; a share that
    rounds to zero is '0.0%' (E1's off arm printed "-0.0%" for a drop that
    gave back a few pages less than nothing), a NaN 'nan%'."""
    v = round(100 * fraction, digits)
    if v == 0:
        v = 0.0         # (-0.0 too)
    return f"{v:.{digits}f}%"


def mib(x: Optional[float]) -> Optional[float]:
    """Bytes as MiB (None stays None)."""
    return None if x is None else x / MiB


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "child":
        sys.exit(_child_main(sys.argv[2:]))
    print("usage: python -m heaplab.harness child PATH EXPERIMENT ARM", file=sys.stderr)
    sys.exit(2)
