"""pytest plugin: the `lab` fixture, arm progress lines and the results tables.

Installed with heaplab and registered through the ``pytest11`` entry point
``heaplab``: pytest loads it by itself (or explicitly with ``pytest -p
heaplab`` when plugin autoloading is off), in any project.  Experiments hand
their arm results to ``lab.record(...)`` and state each asserted effect with
``lab.effect(...)``.

While the suite runs, one line per arm process names the experiment and arm
and, when it ends, how long it took.  At the end of the session:

- the terminal shows the effects table: one line per asserted effect --
  experiment, arm, effect, ours, asserted, ok -- at most 120 columns wide;
- ``<results>/table.txt`` gets the full per-phase table (figures in MiB, the
  effect beside its phase, the seed's figure), ``<results>/effects.txt`` the
  effects table and ``<results>/effects.json`` the effects as records.

Under pytest-xdist, workers write no table: each sends its records and
effects to the controller (workeroutput), which merges them and writes the
tables (docs/harness.md).

``--repeat N`` (or HEAPLAB_REPEAT=N) runs every arm of Experiment.run N
times and judges each assertion on the median of the N (docs/harness.md).
"""
from __future__ import annotations

import json
import os
import textwrap
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

import pytest

from . import harness
from .harness import MiB, results_dir

__all__ = ["Lab", "lab", "render_effects", "TERMINAL_WIDTH"]

#: the widest the terminal table may be (columns)
TERMINAL_WIDTH = 120

_COLUMNS = ("experiment", "arm", "phase", "phys before", "phys after", "peak", "low after mark",
            "heap resident", "effect (ours | asserted)", "seed")
_EFFECT_COLUMNS = ("experiment", "arm", "effect", "ours", "asserted", "ok")


def _ok_word(ok: Optional[bool]) -> str:
    return {True: "ok", False: "FAIL", None: "-"}[ok]


class Lab:
    """The session's arm records and asserted effects (the `lab` fixture)."""

    def __init__(self) -> None:
        self.rows: List[Dict[str, Any]] = []          # phase records, in order
        self.effects: List[Dict[str, Any]] = []
        #: the test that records and states effects now (its node id; the
        #: plugin sets it as each test starts): a parametrized test's records
        #: and effects are told apart by it
        self.test = ""
        self._row_test: List[str] = []                # the test of each row
        self._effect_test: List[str] = []             # the test of each effect
        self._seen: Dict[Tuple[Any, ...], List[Dict[str, Any]]] = {}   # key -> its records
        self._keys: set = set()                       # (test,) + key recorded
        #: experiment -> {protocol variable: value} its arms ran with where it
        #: is not the protocol's (the arm JSONs' protocol_overridden): the
        #: table says so beside the seed's figures, which are the protocol's
        self.overridden: Dict[str, Dict[str, Any]] = {}
        #: experiment -> {arm: did the caller's HEAPLAB_<OPTION> variables
        #: reach it (its record's environment_options is not empty)}
        self.env_reached: Dict[str, Dict[str, bool]] = {}
        #: the experiments whose arms were started (the harness's progress
        #: announcements): one with no rows is named in the tables' header
        self.started: set = set()

    def record(self, results: Any) -> None:
        """Add arm results (a dict arm -> ArmResult, an ArmResult, or raw arm
        JSON dicts as Lua experiments print them) to the table.  A record
        already added -- by this test, or an equal one by another test (a
        shared fixture's results) -- is not added twice; the records of
        different tests (a parametrized test's) are all kept."""
        if isinstance(results, dict) and "records" not in results:
            items: Iterable[Any] = results.values()
        elif isinstance(results, (list, tuple)):
            items = results
        else:
            items = [results]
        for arm in items:
            data = getattr(arm, "data", arm)
            over = data.get("protocol_overridden") if isinstance(data, dict) else None
            if over:
                self.overridden.setdefault(str(data.get("experiment")), {}).update(over)
            if isinstance(data, dict) and "arm" in data:
                self.env_reached.setdefault(str(data.get("experiment")), {})[
                    str(data["arm"])] = bool(data.get("environment_options"))
            for r in data["records"]:
                self._add_row(r, self.test)

    def _seed(self, experiment: str, seed: str) -> str:
        """A seed cell: the seed's figure, and when the experiment ran at
        other sizes than the protocol's, which (the seed's figures are for
        the protocol's sizes: a 192 MB figure beside a 32 MiB run read as a
        comparison)."""
        over = self.overridden.get(experiment)
        if not seed or not over:
            return seed
        sizes = ", ".join(f"{k}={v}" for k, v in sorted(over.items()))
        return f"{seed} [at the protocol's sizes; this run: {sizes}]"

    def _add_row(self, r: Dict[str, Any], test: str) -> None:
        key = (r["experiment"], r["arm"], r["phase"], r.get("index"))
        same = self._seen.setdefault(key, [])
        if (test,) + key in self._keys or any(r == o for o in same):
            return
        self._keys.add((test,) + key)
        same.append(r)
        self.rows.append(r)
        self._row_test.append(test)

    # -- pytest-xdist: each worker's Lab goes to the controller --
    def state(self) -> Dict[str, Any]:
        """The records and effects with their tests, as plain data (what an
        xdist worker sends to the controller in its workeroutput)."""
        return {"rows": list(self.rows), "row_tests": list(self._row_test),
                "effects": list(self.effects), "effect_tests": list(self._effect_test),
                "overridden": dict(self.overridden), "env_reached": dict(self.env_reached),
                "started": sorted(self.started)}

    def merge(self, state: Dict[str, Any]) -> None:
        """Add another Lab's state() (an xdist worker's) to this one."""
        for r, t in zip(state.get("rows", []), state.get("row_tests", [])):
            self._add_row(r, t)
        for e, t in zip(state.get("effects", []), state.get("effect_tests", [])):
            self.effects.append(e)
            self._effect_test.append(t)
        for exp, over in (state.get("overridden") or {}).items():
            self.overridden.setdefault(exp, {}).update(over)
        for exp, arms in (state.get("env_reached") or {}).items():
            self.env_reached.setdefault(exp, {}).update(arms)
        self.started.update(state.get("started") or ())

    def effect(self, experiment: str, what: str, ours: str, asserted: str, arm: str = "",
               phase: str = "", seed: str = "", ok: Optional[bool] = None) -> None:
        """State an asserted effect for the table.  `ours` and `asserted` are
        short strings ("98.7% returned", ">= 97%"; a Python int or float is
        taken too); ok None = reported, not asserted.  Anything else --
        ok="yes", a numpy number -- is a TypeError naming the argument, here:
        it used to be taken and to crash pytest at the end of the session,
        losing the tables."""
        def kind(v: Any) -> str:
            t = type(v)
            return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"
        for name, v in (("experiment", experiment), ("what", what), ("arm", arm),
                        ("phase", phase), ("seed", seed)):
            if not isinstance(v, str):
                raise TypeError(f"lab.effect: {name} must be a string, not {kind(v)} {v!r}")
        for name, v in (("ours", ours), ("asserted", asserted)):
            if not (isinstance(v, str) or type(v) in (int, float)):
                raise TypeError(f"lab.effect: {name} must be a string (or a Python int or "
                                f"float), not {kind(v)} {v!r}")
        if ok is not None and type(ok) is not bool:
            raise TypeError(f"lab.effect: ok must be True, False or None (reported, not "
                            f"asserted), not {kind(ok)} {ok!r}")
        self.effects.append({"experiment": experiment, "arm": arm, "phase": phase, "what": what,
                             "ours": ours, "asserted": asserted, "seed": seed, "ok": ok})
        self._effect_test.append(self.test)

    # -- rendering --
    def table_rows(self) -> List[Tuple[str, ...]]:
        """The full per-phase table's rows (what table.txt holds)."""
        def m(x: Optional[float]) -> str:
            return "" if x is None else f"{x / MiB:.1f}"

        # each effect beside its own record: the first row of its experiment,
        # arm and phase recorded by the same test, else by any test
        first_row: Dict[Tuple[str, ...], int] = {}
        for i, (r, t) in enumerate(zip(self.rows, self._row_test)):
            first_row.setdefault((t, r["experiment"], r["arm"], r["phase"]), i)
            first_row.setdefault(("", r["experiment"], r["arm"], r["phase"], "any"), i)
        at_row: Dict[int, List[Dict[str, Any]]] = {}
        by_key: Dict[Tuple[str, str, str], List[Dict[str, Any]]] = {}
        for e, t in zip(self.effects, self._effect_test):
            key = (e["experiment"], e["arm"], e["phase"])
            i = first_row.get((t,) + key, first_row.get(("",) + key + ("any",)))
            if i is None:
                by_key.setdefault(key, []).append(e)
            else:
                at_row.setdefault(i, []).append(e)
        out: List[Tuple[str, ...]] = []
        for i, r in enumerate(self.rows):
            effects = at_row.get(i, [])
            first = True
            for e in effects or [None]:
                eff = seed = ""
                if e is not None:
                    mark = {True: "ok", False: "FAIL", None: ""}[e["ok"]]
                    eff = f"{e['what']}: {e['ours']} | {e['asserted']} {mark}".strip()
                    seed = self._seed(e["experiment"], e["seed"])
                out.append((r["experiment"], r["arm"], r["phase"],
                            m(r.get("phys_before")) if first else "",
                            m(r.get("phys_after")) if first else "",
                            m(r.get("phys_peak")) if first else "",
                            m(r.get("phys_low_after_mark")) if first else "",
                            m(r.get("resident_after")) if first else "",
                            eff, seed))
                first = False
        for key, effects in by_key.items():
            for e in effects:
                mark = {True: "ok", False: "FAIL", None: ""}[e["ok"]]
                out.append((e["experiment"], e["arm"], e["phase"], "", "", "", "", "",
                            f"{e['what']}: {e['ours']} | {e['asserted']} {mark}".strip(),
                            self._seed(e["experiment"], e["seed"])))
        return out

    def render(self) -> str:
        """The full per-phase table as text (wide: it goes to table.txt)."""
        rows = self.table_rows()
        if not rows:
            return ""
        widths = [max(len(str(c)) for c in col) for col in zip(_COLUMNS, *rows)]

        def line(cells: Sequence[str]) -> str:
            return " | ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
        sep = "-+-".join("-" * w for w in widths)
        return "\n".join([line(_COLUMNS), sep] + [line(r) for r in rows])

    def render_effects(self, width: int = TERMINAL_WIDTH) -> str:
        """The effects table, one line per asserted effect, at most `width`
        columns (long cells wrap onto continuation lines)."""
        rows = [(e["experiment"], e["arm"], e["what"], e["ours"], e["asserted"], _ok_word(e["ok"]))
                for e in self.effects]
        return render_effects(rows, width)


def render_effects(rows: Sequence[Sequence[str]], width: int = TERMINAL_WIDTH,
                   columns: Sequence[str] = _EFFECT_COLUMNS) -> str:
    """A table of `rows` under `columns` that fits in `width` columns: the
    widest cells wrap (at spaces where they can) until every line fits."""
    if not rows:
        return ""
    n = len(columns)
    natural = [max(len(str(c)) for c in col) for col in zip(columns, *rows)]
    widths = list(natural)
    budget = width - 3 * (n - 1)
    floor = [max(4, len(c)) for c in columns]
    while sum(widths) > budget:
        # shrink the widest column that can still give
        i = max((k for k in range(n) if widths[k] > floor[k]), key=lambda k: widths[k],
                default=None)
        if i is None:
            break
        widths[i] -= 1

    def cells(row: Sequence[str]) -> List[List[str]]:
        return [textwrap.wrap(str(c), w, break_on_hyphens=False) or [""]
                for c, w in zip(row, widths)]

    def lines(row: Sequence[str]) -> List[str]:
        wrapped = cells(row)
        height = max(len(c) for c in wrapped)
        out = []
        for k in range(height):
            parts = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(wrapped, widths)]
            out.append(" | ".join(parts).rstrip())
        return out

    text = lines(columns)
    text.append("-+-".join("-" * w for w in widths))
    for r in rows:
        text.extend(lines(r))
    return "\n".join(text)


def _lab_of(config: Any) -> Lab:
    """The session's Lab: one per pytest config, made at configure time.  A
    module global carried one session's records and effects into the next
    (pytest.main twice in one process: the second session's tables held the
    first's effects too)."""
    lab = getattr(config, "_heaplab_lab", None)
    if lab is None:
        lab = config._heaplab_lab = Lab()       # type: ignore[attr-defined]
    return lab


@pytest.fixture(scope="session")
def lab(request: Any) -> Lab:
    """The session's Lab: record(arm results) and effect(...) for the tables."""
    return _lab_of(request.config)


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("heaplab")
    group.addoption("--repeat", type=int, default=None, metavar="N",
                    help="heaplab: run every arm of Experiment.run N times and judge each "
                         "assertion on the median (default: HEAPLAB_REPEAT or 1)")


class _Progress:
    """Writes one line per arm process to the terminal: its label when it
    starts and its time when it ends (output capture is suspended for the
    write, so the line shows while the test runs)."""

    def __init__(self, tr: Any, capman: Any) -> None:
        self.tr = tr
        self.capman = capman
        self.open = False
        self.test = ""

    def __call__(self, event: str, label: str, info: Dict[str, Any]) -> None:
        if self.capman is not None:
            with self.capman.global_and_fixture_disabled():
                self._write(event, label, info)
        else:
            self._write(event, label, info)

    def _newline(self) -> None:
        # pytest -q leaves its progress dots on an open line
        if getattr(self.tr._tw, "width_of_current_line", 0):
            self.tr.write_line("")

    def _write(self, event: str, label: str, info: Dict[str, Any]) -> None:
        tr = self.tr
        if event == "start":
            self._close("")
            self._newline()
            tr.write(f"  {self.test}{label} ... ", flush=True)
            self.open = True
        elif event == "end":
            word = "" if info.get("ok") else " (failed)"
            self._close(f"{info.get('seconds', 0):.1f} s{word}")
        elif event == "spawn":
            self._close("")
            self._newline()
            tr.write_line(f"  {self.test}{label} started")

    def _close(self, text: str) -> None:
        if self.open:
            self.tr.write_line(text)
            self.open = False


def _environment_line(lab: Optional[Lab] = None) -> Optional[str]:
    """The HEAPLAB_<OPTION> variables of the environment, and which arms
    they reach (docs/harness.md), or None: said at the top and under the
    results table, as a passing test does not show its stderr (and -q drops
    the top).  Under the table, with the session's `lab`: which of its arms
    got them and which did not, from their records (environment_options).
    It said "command arms on an allocator do not get it", and the Lua arms
    -- which do -- recorded nothing, while E8's and E10's real-interpreter
    arms -- no allocator arms -- drop them."""
    env = harness.environment_options()
    if not env:
        return None
    head = ("heaplab: " + ", ".join(f"HEAPLAB_{k.upper()}={v}" for k, v in env.items()) +
            " in the environment: the default of every heap that does not set it, in the arms "
            "that get the caller's HEAPLAB_* -- Experiment arms and command arms that do not "
            "drop them (the Lua arms); not arms on an allocator, nor arms that drop HEAPLAB_* "
            "(E8, E9, E10's real interpreters); each arm's record says what it got "
            "(environment_options)")
    if lab is None or not lab.env_reached:
        return head

    def arms(exp: str, names: List[str], total: int) -> str:
        return exp if len(names) == total else f"{exp} ({', '.join(sorted(names))})"
    got, not_got = [], []
    for exp in sorted(lab.env_reached):
        by_arm = lab.env_reached[exp]
        yes = [a for a, r in by_arm.items() if r]
        no = [a for a, r in by_arm.items() if not r]
        if yes:
            got.append(arms(exp, yes, len(by_arm)))
        if no:
            not_got.append(arms(exp, no, len(by_arm)))
    return (head + ". This session's arms that got it: " + (", ".join(got) or "none") +
            "; that did not: " + (", ".join(not_got) or "none"))


def pytest_report_header(config: Any) -> Optional[str]:
    return _environment_line()


@pytest.hookimpl(trylast=True)       # after the terminal reporter exists
def pytest_configure(config: Any) -> None:
    config._heaplab_lab = Lab()                 # type: ignore[attr-defined]
    # the environment's heaplab settings, checked once, here: a bad
    # HEAPLAB_REPEAT failed every Python test on its own, an unwritable
    # HEAPLAB_RESULTS each test after its first arm (FileNotFoundError)
    why = harness.check_results_dir()
    if why:
        raise pytest.UsageError(f"heaplab: {why} (it is where the arms' records and the tables "
                                f"go; unset or empty: ./results)")
    # the session every arm JSON of this pytest session records (an xdist
    # worker's: the controller's, pytest_configure_node); put back at the end
    winput = getattr(config, "workerinput", None)
    given = winput.get("heaplab_session") if isinstance(winput, dict) else None
    config._heaplab_session_was = harness.set_session(  # type: ignore[attr-defined]
        given or harness.new_session())
    n = config.getoption("--repeat", default=None)
    if n is None:
        try:
            harness._env_repeat()
        except ValueError as e:
            raise pytest.UsageError(f"heaplab: {e} (or --repeat N)") from None
    if n is not None:
        if n < 1:
            raise pytest.UsageError(f"--repeat {n}: expected a whole number >= 1")
        # the session's: put back at its end (a later session in the same
        # process ran every arm n times)
        config._heaplab_repeat_was = os.environ.get("HEAPLAB_REPEAT")  # type: ignore[attr-defined]
        os.environ["HEAPLAB_REPEAT"] = str(n)
    config._heaplab_signals = _stop_signals_interrupt()   # type: ignore[attr-defined]
    lab = _lab_of(config)

    def started(event: str, label: str, info: Dict[str, Any]) -> None:
        if info.get("experiment"):
            lab.started.add(str(info["experiment"]))
    config._heaplab_started = harness.add_progress_listener(started)  # type: ignore[attr-defined]
    watch = config._heaplab_watch = _SessionWatch()    # type: ignore[attr-defined]
    config.pluginmanager.register(watch, "heaplab-session-watch")
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is not None and not config.getoption("--collect-only", default=False):
        prog = _Progress(tr, config.pluginmanager.get_plugin("capturemanager"))
        config._heaplab_progress = prog          # type: ignore[attr-defined]
        harness.add_progress_listener(prog)


@pytest.hookimpl(optionalhook=True)      # pytest-xdist's hook: absent without it
def pytest_configure_node(node: Any) -> None:
    node.workerinput["heaplab_session"] = harness.session_info()


def _stop_signals_interrupt() -> Dict[int, Any]:
    """SIGTERM and SIGHUP end the session as Ctrl-C does: a KeyboardInterrupt
    -- through SIGINT's handler of the moment, so that a block the harness
    holds Ctrl-C off in (_ctrl_c_deferred: a spawn, a clean-up) holds them
    off too -- which stops the arm running (its group signalled, its record
    saved, "interrupted"), writes the interrupted tables and exits 2.  They
    killed pytest outright (exit 143): every arm process, in a session of
    its own, ran on (E6's unbounded arm spinning at the map limit, E9's
    redis-server).  Only in the main thread (only it sets handlers), and
    only over the default action (a handler of the caller's, or SIG_IGN --
    nohup's SIGHUP -- is left alone); returns {signal: handler before},
    which pytest_unconfigure puts back."""
    import signal
    import threading
    if threading.current_thread() is not threading.main_thread():
        return {}

    def interrupt(signum: int, frame: Any) -> None:
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler) and handler is not interrupt:
            handler(signal.SIGINT, frame)       # (KeyboardInterrupt, or noted and deferred)
        else:
            raise KeyboardInterrupt(f"heaplab: {signal.Signals(signum).name}")
    before: Dict[int, Any] = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) == signal.SIG_DFL:
            before[signum] = signal.signal(signum, interrupt)
    return before


def pytest_unconfigure(config: Any) -> None:
    if getattr(config, "_heaplab_signals", None):
        import signal
        import threading
        if threading.current_thread() is threading.main_thread():
            for signum, handler in config._heaplab_signals.items():
                signal.signal(signum, handler)
        config._heaplab_signals = {}
    if hasattr(config, "_heaplab_session_was"):
        harness.set_session(config._heaplab_session_was)
    if hasattr(config, "_heaplab_started"):
        harness.remove_progress_listener(config._heaplab_started)
    watch = getattr(config, "_heaplab_watch", None)
    if watch is not None and config.pluginmanager.is_registered(watch):
        config.pluginmanager.unregister(watch)
    prog = getattr(config, "_heaplab_progress", None)
    if prog is not None:
        harness.remove_progress_listener(prog)
    if hasattr(config, "_heaplab_repeat_was"):
        was = config._heaplab_repeat_was
        if was is None:
            os.environ.pop("HEAPLAB_REPEAT", None)
        else:
            os.environ["HEAPLAB_REPEAT"] = was


def pytest_collection_finish(session: Any) -> None:
    session.config._heaplab_total = len(session.items)   # type: ignore[attr-defined]


class _SessionWatch:
    """What the session ran (registered per pytest config, at configure):
    the tests deselected, the tests that reported, the tests that failed --
    what the tables' header says they cover."""

    def __init__(self) -> None:
        self.deselected = 0
        self.collected: Optional[int] = None
        self.ran: set = set()
        self.failed: List[str] = []
        #: pytest-xdist's reason for ending the session early, when it did
        #: (its Interrupted, a KeyboardInterrupt: "stopping after 1 failures"
        #: for -x / --maxfail, "gw0 received keyboard-interrupt" for Ctrl-C)
        self.xdist_stop: Optional[str] = None
        #: the session ended because its standard output was closed (a
        #: BrokenPipeError at one of pytest's writes: `| head`, a pager quit)
        self.output_closed = False

    def pytest_deselected(self, items: Any) -> None:
        self.deselected += len(items)

    def pytest_collection_finish(self, session: Any) -> None:
        self.collected = len(session.items)

    def pytest_runtest_logreport(self, report: Any) -> None:
        self.ran.add(report.nodeid)
        if report.failed and report.nodeid not in self.failed:
            self.failed.append(report.nodeid)

    def pytest_keyboard_interrupt(self, excinfo: Any) -> None:
        exc = excinfo.value
        if type(exc).__module__.startswith("xdist."):
            self.xdist_stop = str(exc)

    @pytest.hookimpl(tryfirst=True)      # before the terminal reporter writes it
    def pytest_internalerror(self, excinfo: Any) -> None:
        if isinstance(getattr(excinfo, "value", None), BrokenPipeError):
            self.output_closed = True

    # -- pytest-xdist: the controller collects nothing itself --
    def state(self) -> Dict[str, Any]:
        """What a worker collected and deselected (sent to the controller)."""
        return {"collected": self.collected, "deselected": self.deselected}

    def merge(self, state: Dict[str, Any]) -> None:
        """A worker's state(): every worker collects the whole selection, so
        the counts are any worker's, not their sum (the largest, should one
        worker's collection differ)."""
        if state.get("collected") is not None:
            self.collected = max(self.collected or 0, int(state["collected"]))
        self.deselected = max(self.deselected, int(state.get("deselected") or 0))


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: Any) -> None:
    _lab_of(item.config).test = item.nodeid
    prog = getattr(item.config, "_heaplab_progress", None)
    if prog is not None:
        total = getattr(item.config, "_heaplab_total", 0)
        idx = item.session.items.index(item) + 1 if item in item.session.items else 0
        prog.test = f"[test {idx}/{total}] " if total else ""


def _is_xdist_worker(config: Any) -> bool:
    """Is this session a pytest-xdist worker?  (xdist gives a worker's config
    `workerinput`; not PYTEST_XDIST_WORKER, which a pytest that a test of a
    worker starts inherits.)"""
    return hasattr(config, "workerinput")


def pytest_sessionfinish(session: Any, exitstatus: Any) -> None:
    # an xdist worker writes no table (each wrote the same table.txt,
    # effects.txt and effects.json, the last to end won): its records and
    # effects go to the controller with the worker's output, merged there
    # (pytest_testnodedown) into the one set of tables
    config = session.config
    watch = getattr(config, "_heaplab_watch", None)
    if _is_xdist_worker(config):
        if hasattr(config, "workeroutput"):
            config.workeroutput["heaplab_lab"] = _lab_of(config).state()
            if watch is not None:
                config.workeroutput["heaplab_collection"] = watch.state()
        return
    # the tables are written here, before pytest writes its summary (the
    # terminal summary prints them): a session whose output was closed ends
    # at pytest's next write, and it is said on stderr, which still reaches
    # the user (`pytest experiments | head`: exit status 1, nothing said,
    # no tables)
    written = _write_tables(config, exitstatus)
    if watch is not None and watch.output_closed:
        import sys
        # (under xdist the controller has no count of its own until a worker
        # goes down, nor the workers' records: no tables then)
        ran = f"{len(watch.ran)} of {watch.collected}" if watch.collected is not None \
            else f"{len(watch.ran)}"
        where = (f"the tables of the part that ran: {written['tables']} (and beside it "
                 f"effects.interrupted.txt and .json); " if written else "")
        try:
            sys.stderr.write(
                f"heaplab: the session stopped after {ran} tests: its "
                f"standard output was closed (a `| head`, or a pager that quit), and pytest "
                f"ends at its next write; {where}the arms' records are in {results_dir()}. "
                f"For the whole session, keep the output open (`| tee FILE`, or a file)\n")
            sys.stderr.flush()
        except OSError:
            pass


@pytest.hookimpl(optionalhook=True)      # pytest-xdist's hook: absent without it
def pytest_testnodedown(node: Any, error: Any) -> None:
    # (and what it collected: the controller collects nothing, so without
    # the workers' counts a -k session's tables said 'complete session', 1 of
    # 1 collected tests ran, and a -x one's every test collected had run)
    out = getattr(node, "workeroutput", {})
    state = out.get("heaplab_lab")
    if state:
        _lab_of(node.config).merge(state)
    watch = getattr(node.config, "_heaplab_watch", None)
    if out.get("heaplab_collection") and watch is not None:
        watch.merge(out["heaplab_collection"])


def _coverage(config: Any, lab: Lab, exitstatus: Any) -> Dict[str, Any]:
    """What the session's tables cover: its selection (the -k and -m
    expressions, the paths and test ids given), how many of the collected
    tests ran, the failed tests, the experiments with rows and those whose
    arms started and left none, the exit status, and whether it is
    complete (every test collected from the folders given ran, nothing
    deselected, not interrupted).  The header line of table.txt and
    effects.txt and effects.json's "session": a -k session's tables replaced
    the whole suite's without a word, and one whose arm was killed left
    effects.txt without its rows, nothing saying so."""
    watch = getattr(config, "_heaplab_watch", None) or _SessionWatch()
    args = [str(a) for a in getattr(config, "args", None) or []]
    params = getattr(config, "invocation_params", None)
    base = str(getattr(params, "dir", "") or "")

    def option(name: str) -> str:
        get = getattr(config, "getoption", None)
        return str((get(name, default="") if get is not None else "") or "")

    def is_dir(a: str) -> bool:
        return "::" not in a and os.path.isdir(os.path.join(base, a) if base else a)
    selected = watch.collected if watch.collected is not None else len(watch.ran)
    with_rows = sorted({str(r["experiment"]) for r in lab.rows}, key=_natural)
    try:
        status: Optional[int] = int(exitstatus)
    except (TypeError, ValueError):
        status = None
    # pytest-xdist ends a -x / --maxfail session with its Interrupted, a
    # KeyboardInterrupt: exit status 2, as Ctrl-C.  It is the stop -x asked
    # for -- a partial session, as without xdist -- not an interrupt (its
    # tables went to table.interrupted.txt ...)
    stopped = (watch.xdist_stop or "").startswith("stopping after ")
    # a session that ended on an internal error (exit status 3: its output
    # closed, a plugin's crash) is cut short as an interrupted one is: its
    # part goes beside the last complete tables, not over them
    interrupted = status in (int(pytest.ExitCode.INTERRUPTED),
                             int(pytest.ExitCode.INTERNAL_ERROR)) and not stopped
    # a selection of the command line's: -k, -m, --lf, --deselect (a -m of
    # the configuration's addopts -- this project's 'not bench' -- is the
    # suite's own definition, not a selection)
    cli = [str(a) for a in getattr(params, "args", ()) or ()]
    chosen = any(a in ("-k", "-m", "--lf", "--last-failed", "--deselect", "--sw", "--stepwise")
                 or a.startswith(("-k", "-m", "--deselect=", "--keyword", "--markexpr"))
                 for a in cli)
    complete = (not interrupted and (watch.deselected == 0 or not chosen)
                and len(watch.ran) >= selected and all(is_dir(a) for a in args))
    sess = harness.session_info()
    return {
        "session": sess["id"], "started": sess["started"],
        "selection": {"keyword": option("keyword"), "markexpr": option("markexpr"),
                      "args": args},
        "tests": {"collected": selected + watch.deselected, "deselected": watch.deselected,
                  "selected": selected, "ran": len(watch.ran)},
        "failed_tests": list(watch.failed),
        "experiments_with_rows": with_rows,
        "experiments_without_rows": sorted(lab.started - set(with_rows), key=_natural),
        "exit_status": status, "interrupted": interrupted, "complete": complete,
        "selected_by_the_command_line": chosen,
    }


def _natural(name: str) -> Tuple[Any, ...]:
    """E2 before E10."""
    import re
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _coverage_line(c: Dict[str, Any]) -> str:
    """The tables' first line: what they cover (_coverage)."""
    sel = c["selection"]
    said = [f"-k {sel['keyword']!r}"] if sel["keyword"] else []
    said += [f"-m {sel['markexpr']!r}"] if sel["markexpr"] else []
    said += [" ".join(sel["args"])] if sel["args"] else []
    t = c["tests"]
    tests = f"{t['ran']} of {t['collected']} collected tests ran"
    if t["deselected"]:
        tests += (f" ({t['deselected']} deselected)" if c.get("selected_by_the_command_line")
                  else f" ({t['deselected']} deselected by the configuration's own selection)")
    if t["ran"] < t["selected"]:
        tests += f" ({t['selected'] - t['ran']} selected did not run: -x, a stop, an interrupt)"
    kind = "complete session" if c["complete"] else \
        "INTERRUPTED session" if c["interrupted"] else "PARTIAL session"
    exps = c["experiments_with_rows"]
    return (f"heaplab: {kind} {c['session']}: selection {', '.join(said) or '(none)'}; "
            f"{tests}; experiments with rows: {len(exps)} ({', '.join(exps) or 'none'}); "
            f"failed tests: {', '.join(c['failed_tests']) or 'none'}; experiments whose arms "
            f"started and left no rows: {', '.join(c['experiments_without_rows']) or 'none'}; "
            f"exit status {c['exit_status'] if c['exit_status'] is not None else 'unknown'}")


def _write_tables(config: Any, exitstatus: Any) -> Optional[Dict[str, Any]]:
    """Write the session's tables (table.txt, effects.txt, effects.json, or
    their .interrupted forms) and return what the terminal summary says of
    them: {"effects": the terminal's table, "lines": [...]}; None when the
    session has no rows and no effects (nothing written).  Called from
    pytest_sessionfinish, which pytest calls even when the session ends on
    an internal error -- the tables were written in the terminal summary,
    after pytest's own summary lines, so a session whose standard output
    was closed (`pytest experiments | head`) died at pytest's next write and
    wrote none -- and once: pytest_terminal_summary prints what it wrote."""
    if hasattr(config, "_heaplab_tables"):
        return config._heaplab_tables            # type: ignore[no-any-return]
    lab = _lab_of(config)
    full = lab.render()
    if not full and not lab.effects:
        config._heaplab_tables = None            # type: ignore[attr-defined]
        return None
    effects = lab.render_effects()
    folder = results_dir()
    # an interrupted session (Ctrl-C: exit status 2; a closed output or
    # another internal error: 3) has part of the tables: they go beside the
    # last complete ones (table.interrupted.txt ...), which they used to
    # replace without a word.  Every table says what it covers on its first
    # line (and effects.json in its "session"): a -k session's replace the
    # whole suite's, saying so
    cover = _coverage(config, lab, exitstatus)
    head = _coverage_line(cover)
    interrupted = cover["interrupted"]
    tag = ".interrupted" if interrupted else ""
    lines: List[str] = []
    try:
        os.makedirs(folder, exist_ok=True)
        harness.write_atomic(os.path.join(folder, f"table{tag}.txt"), head + "\n" + full + "\n")
        harness.write_atomic(os.path.join(folder, f"effects{tag}.txt"),
                             head + "\n" + effects + "\n")
        harness.write_atomic(os.path.join(folder, f"effects{tag}.json"),
                             json.dumps({"session": cover, "effects": lab.effects}, indent=1))
        lines.append(f"full per-phase table (MiB; phys = phys_footprint): "
                     f"{os.path.join(folder, f'table{tag}.txt')}")
        if interrupted:
            lines.append("heaplab: the session was interrupted: the tables above are partial, "
                         f"written as table{tag}.txt, effects{tag}.txt and effects{tag}.json; "
                         "table.txt, effects.txt and effects.json are the last complete "
                         "session's")
        elif not cover["complete"]:
            lines.append("heaplab: a partial session (" + head.split(": ", 2)[2].split(";")[0] +
                         "): table.txt, effects.txt and effects.json hold its part only, "
                         "and their first line says so")
        else:
            stale = [n for n in ("table.interrupted.txt", "effects.interrupted.txt",
                                 "effects.interrupted.json")
                     if os.path.exists(os.path.join(folder, n))]
            for n in stale:
                os.remove(os.path.join(folder, n))
            if stale:
                lines.append(f"heaplab: removed the tables of an earlier interrupted session "
                             f"({', '.join(stale)}): this complete session's replace them")
        lines.append(f"records: {folder}")
        env_line = _environment_line(lab)
        if env_line:
            lines.append(env_line)
    except OSError as e:
        lines.append(f"heaplab: cannot write the tables under {folder}: {e}")
    written = {"effects": effects, "lines": lines, "coverage": cover,
               "tables": os.path.join(folder, f"table{tag}.txt")}
    config._heaplab_tables = written             # type: ignore[attr-defined]
    return written


def pytest_terminal_summary(terminalreporter: Any, exitstatus: Any) -> None:
    if _is_xdist_worker(terminalreporter.config):
        return
    written = _write_tables(terminalreporter.config, exitstatus)
    if written is None:
        return
    tr = terminalreporter
    if written["effects"]:
        tr.write_sep("=", "heaplab effects (ok = asserted and held; - = reported)")
        tr.write_line(written["effects"])
    for line in written["lines"]:
        tr.write_line(line)
