"""Sweeps: option grids x arms x repeats, each an isolated process on a Dask worker.

    heaplab run e1 --set warm_pages=0,64,256 --set page_size=16k,64k --repeat 5
    heaplab run e1 --cluster tcp://10.0.0.5:8786 --resume results/20261201-221500-3fa2c1
    heaplab run lua:e1_page_floor --arms off,on --set HEAPLAB_E1_FILL_MIB=32,64
    heaplab run --command "build/clients/heaplab-lua tests/clients/programs/page_floor.lua {arm} 64" \\
                --arms lua/on,lua/off --arm-env lua/off:HEAPLAB_PAGE_RELEASE=false

A *cell* is one combination of the grid's values; a *task* is one cell x arm x
repeat, run as one fresh process (the harness's arm runner: a Python child, a
lua5.4 script or a command) by a Dask worker that runs one task at a time
(the `arm` resource; --per-worker raises it).  Grid values reach the arm's
process as environment variables: an option name (warm_pages) becomes
HEAPLAB_WARM_PAGES, which the library reads as the option's default (an arm's
own options still win, so sweeping an option the arm sets is refused); a name
in capitals (HEAPLAB_E1_FILL_MIB) is passed as it is -- the experiments'
protocol sizes.

Every task's arm JSON is written by the client, once, to
``<results>/<run-id>/<experiment>/<cell>/<arm>.r<k>.json`` with a ``sweep``
block (cell, values, repeat, worker, host, seconds, status, stderr tail) and
the experiment's effects as numbers.  ``<run-id>/meta.json`` keeps the
provenance; ``<results>/latest`` points to the newest run.  Nothing is
overwritten: --resume re-runs only the tasks whose records are missing or
failed.  A task whose process crashes, prints no JSON or times out is
recorded as failed (status, error, stderr tail) and the sweep goes on; a
worker lost mid-task has its task rescheduled by Dask on another worker.
"""
from __future__ import annotations

import contextlib
import datetime
import glob
import hashlib
import itertools
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Tuple)

from .harness import (_CHILD_TEXT, Experiment, _arm_problem, _ctrl_c_deferred, _name,
                      _signals_handled,
                      arm_file_stem, check_arm_names, child_env, derived_figures, load_json_record,
                      _kill_live_groups, _library_value, _make_folder, _proc_stat,
                      run_in_group,
                      write_atomic)

__all__ = [
    "Sweep", "Task", "SweepError", "parse_set", "expand_grid", "build_sweep", "run_sweep",
    "run_task", "host_info", "load_meta", "meta_value", "complete_records", "effects_of", "RUN_META",
]

#: the provenance file of a run folder
RUN_META = "meta.json"
MiB = 1 << 20


class SweepError(ValueError):
    """A sweep that cannot run as asked (bad grid, unknown experiment or arm...)."""


# ---- the grid -------------------------------------------------------------------------

def parse_set(items: Sequence[str]) -> Dict[str, List[str]]:
    """--set NAME=v1,v2 items as {NAME: [values]} (in order; a name twice is
    an error).  An option name (lower case) must be one of heaplab's
    options; a name in capitals is an environment variable."""
    import heaplab
    known = heaplab.options()
    grid: Dict[str, List[str]] = {}
    for item in items:
        name, eq, values = item.partition("=")
        name = name.strip()
        if not eq or not name or not values.strip():
            raise SweepError(f"--set {item!r}: expected NAME=VALUE[,VALUE...]")
        if name in grid:
            raise SweepError(f"--set {name} given twice")
        if name.isupper() or not name.islower():
            if not name.replace("_", "").isalnum() or not name.isupper():
                raise SweepError(f"--set {name}: an option (lower case: {', '.join(list(known)[:4])}"
                                 "...) or an environment variable (upper case)")
        elif name not in known:
            raise SweepError(f"--set {name}: not an option of heaplab (python3 -m heaplab "
                             f"options lists them)")
        vals = [v.strip() for v in values.split(",")]
        if any(not v for v in vals):
            raise SweepError(f"--set {item!r}: an empty value")
        if len(set(vals)) != len(vals):
            raise SweepError(f"--set {item!r}: a value given twice")
        option = _option_of(name)
        if option in known:
            # each value as the library will read HEAPLAB_<NAME> in the arms:
            # a value it refuses failed every task after the cluster started
            # (the name alone was checked); two spellings of one value
            # (16k, 16384) made two cells alike
            seen: Dict[Any, str] = {}
            for v in vals:
                try:
                    read = _library_value(option, v)
                except (heaplab.Error, ValueError) as e:
                    raise SweepError(f"--set {name}={v}: {e}") from None
                if read in seen:
                    raise SweepError(f"--set {name}: {seen[read]} and {v} are the same value "
                                     f"({read})")
                seen[read] = v
        grid[name] = vals
    return grid


def _check_variable_name(where: str, name: str) -> None:
    """A HEAPLAB_ name no part of heaplab reads (hl_env_var_kind: a typo,
    HEAPLAB_WARM_PAGE, or an option's name in another case): SweepError
    before anything runs.  Taken, every arm's heap ignored it -- a warning in
    each task's stderr -- and every cell of the grid ran at the default."""
    from ._heaplab import ffi, lib
    raw = name.encode("utf-8", "surrogateescape")
    if not name.startswith("HEAPLAB_") or lib.hl_env_var_kind(raw) != lib.HL_ENV_NONE:
        return
    near = lib.hl_option_nearest(raw[len("HEAPLAB_"):].lower())
    hint = (f"; did you mean HEAPLAB_{ffi.string(near).decode().upper()}?" if near != ffi.NULL
            else "")
    raise SweepError(f"{where} {name}: heaplab reads no such variable{hint} (python3 -m heaplab "
                     "options lists the options; an experiment's own variable: HEAPLAB_X_<NAME>)")


def _check_option_variable(where: str, name: str, value: str) -> None:
    """A HEAPLAB_<OPTION>=value of --env or --arm-env (`where`), read by the
    library's own parser as the arms' heaps will read it: SweepError naming
    it when refused (every task failed on it in its arm)."""
    import heaplab
    if not name.startswith("HEAPLAB_") or _option_of(name) not in heaplab.options():
        return
    try:
        _library_value(_option_of(name), value)
    except (heaplab.Error, ValueError) as e:
        raise SweepError(f"{where} {name}={value}: {e}") from None


def _option_of(name: str) -> str:
    """The option a grid name sets: itself, or NAME of HEAPLAB_NAME."""
    return name[len("HEAPLAB_"):].lower() if name.startswith("HEAPLAB_") else name


def env_name(name: str) -> str:
    """The environment variable that carries a grid name to an arm."""
    return name if name.isupper() else "HEAPLAB_" + name.upper()


def expand_grid(grid: Mapping[str, Sequence[str]]) -> List[Tuple[str, Dict[str, str]]]:
    """[(cell id, {name: value})] for every combination (one empty cell for
    an empty grid); ids are c000, c001, ... in itertools.product order."""
    names = list(grid)
    combos = list(itertools.product(*(grid[n] for n in names))) if names else [()]
    width = max(3, len(str(len(combos) - 1)))
    return [(f"c{i:0{width}d}", dict(zip(names, combo))) for i, combo in enumerate(combos)]


# ---- what a task runs ------------------------------------------------------------------------

class Task(dict):
    """One cell x arm x repeat: a dict (it travels to the worker as is) with
    key, experiment, kind (python, lua, command), arm, cell, values, repeat,
    env, timeout and what the kind needs (path + var, script, argv)."""

    @property
    def key(self) -> str:
        """The task's name: the Dask key and the record's file stem."""
        return str(self["key"])


def _child_env(env: Mapping[str, str]) -> Dict[str, str]:
    # the arm's environment decides: no HEAPLAB_* of the worker leaks into it
    # except what tells the harness where things are
    keep = {k: v for k, v in os.environ.items()
            if k in ("HEAPLAB_LUA_CPATH", "HEAPLAB_EXPERIMENTS")}
    out = child_env(None, drop=("HEAPLAB_",))
    out.update(keep)
    out.update(env)
    return out


def _resolve_python(task: Mapping[str, Any]) -> List[str]:
    path = task["path"]
    if not os.path.isfile(path):
        # another machine: the same experiment from its own checkout or package
        from .notebooks import experiments_dir
        cand = os.path.join(experiments_dir(), os.path.basename(path))
        if not os.path.isfile(cand):
            raise FileNotFoundError(f"{path}: not on this worker, nor {cand}")
        path = cand
    return [sys.executable, "-m", "heaplab.harness", "child", path, task["var"], task["arm"]]


def _resolve_lua(task: Mapping[str, Any]) -> Tuple[List[str], Dict[str, str]]:
    script = task["script"]
    lua = shutil.which("lua5.4") or "lua5.4"
    folder = os.path.dirname(script)
    env = {"LUA_PATH": os.path.join(folder, "?.lua") + ";;"}
    cpath = os.environ.get("HEAPLAB_LUA_CPATH") or task.get("lua_cpath")
    if cpath:
        env["LUA_CPATH"] = cpath
    return [lua, script, task["arm"]], env


def run_task(task: Mapping[str, Any]) -> Dict[str, Any]:
    """Run one task in a fresh process and return its record: the arm JSON
    the process printed plus a `sweep` block -- or, when the process
    crashed, printed no JSON or ran past the timeout, a record with status
    'failed', the error and the stderr tail.  Runs on a Dask worker (or
    anywhere); never raises for a failing arm."""
    # (the task's process gets this thread's signal mask: a local worker's
    # threads may have SIGINT and SIGHUP blocked from its start, _cluster)
    with contextlib.suppress(AttributeError, ValueError, OSError):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WORKER_SIGNALS)
    env = dict(task.get("env") or {})
    t0 = time.monotonic()
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    cwd = task.get("cwd") if task.get("cwd") and os.path.isdir(task["cwd"]) else None
    try:
        if task["kind"] == "python":
            argv = _resolve_python(task)
        elif task["kind"] == "lua":
            argv, extra = _resolve_lua(task)
            env = {**extra, **env}
        else:
            argv = [a.replace("{arm}", task["arm"]) for a in task["argv"]]
    except (FileNotFoundError, KeyError) as e:
        argv, error = [], f"cannot start the arm: {e}"
    else:
        error = None
    data: Dict[str, Any] = {}
    stderr = ""
    returncode: Optional[int] = None
    if error is None:
        try:
            # in a process group of its own, killed when the task ends: a
            # helper the arm left running survived the sweep, and held the
            # task's pipes until its timeout (subprocess.run waited for them)
            rc, out, stderr = run_in_group(argv, _child_env(env), cwd,
                                           task.get("timeout") or 600)
            last = stderr.strip().splitlines()[-1:]
            if rc is None:
                error = f"no result within {task.get('timeout') or 600} s (killed)"
            elif rc == 127 and last and last[0].startswith("heaplab: cannot start "):
                returncode, error = rc, last[0][len("heaplab: "):]
            else:
                returncode = rc
                try:
                    data = json.loads(out)
                    if not isinstance(data, dict) or "records" not in data:
                        raise ValueError("not an arm document")
                except ValueError:
                    data = {}
                    error = (f"exit {rc}, no arm JSON on stdout"
                             + (f" (stdout: {out[:300]!r})" if out.strip() else ""))
                else:
                    # an arm document of the wrong shape made the code below
                    # raise (AttributeError, TypeError): the task was 'failed
                    # on every worker', its exit status and stderr lost
                    why = _arm_problem({"experiment": task["experiment"], "arm": task["arm"],
                                        **data})
                    if why:
                        data = {}
                        error = f"exit {rc}, the arm JSON on stdout cannot be read: {why}"
        except OSError as e:
            error = f"cannot start {argv[0]}: {e}"
    if not data:
        data = {"experiment": task["experiment"], "title": "", "arm": task["arm"],
                "options": {}, "params": {}, "records": [], "notes": {}, "series": [],
                "error": error}
    arm_error = data.get("error")
    if arm_error is not None and not str(arm_error).strip():
        arm_error = "(an empty error)"
    if error is None and not data.get("records") and not arm_error and returncode in (0, None):
        # (counted ok, it was run again by every --resume: a record without
        # phase records is not complete)
        error = "the arm recorded no phase"
    status = "ok" if error is None and not arm_error and returncode in (0, None) else "failed"
    if error is None and status == "failed":
        error = (f"the arm raised: {str(arm_error).strip().splitlines()[-1]}" if arm_error
                 else f"exit {returncode}")
    try:
        from distributed import get_worker
        worker = get_worker().address
    except (ImportError, ValueError):
        worker = None
    data["sweep"] = {
        "run_id": task.get("run_id"), "key": task["key"], "cell": task["cell"],
        "values": task["values"], "repeat": task["repeat"], "arm": task["arm"],
        "experiment": task["experiment"], "status": status, "error": error,
        "returncode": returncode, "stderr_tail": stderr[-2000:], "worker": worker,
        "host": socket.gethostname(), "pid_worker": os.getpid(), "started": started,
        "seconds": round(time.monotonic() - t0, 3), "argv": argv, "env": env,
    }
    data["repeat"] = task["repeat"]
    data["cell"] = task["cell"]
    data["effects_numeric"] = effects_of(data, task.get("experiment_path"))
    return data


# ---- effects as numbers ---------------------------------------------------------------------

def effects_of(data: Mapping[str, Any], experiment_path: Optional[str] = None
               ) -> List[Dict[str, Any]]:
    """The effects of one arm's record as numbers: [{effect, value, unit,
    threshold, passed, direction}].  An experiment module may define
    `arm_effects(data) -> list` (E1 does: the share of the dropped footprint
    returned); every arm also gets the generic ones: the peak above the arm's
    start and, for each marked phase, what came back after the mark."""
    out: List[Dict[str, Any]] = []
    fn = _experiment_effects(experiment_path)
    if fn is not None and data.get("records"):
        try:
            out.extend(fn(data))
        except (KeyError, ZeroDivisionError, TypeError, ValueError) as e:
            out.append({"effect": "arm_effects", "value": None, "unit": "", "threshold": None,
                        "passed": None, "error": f"{type(e).__name__}: {e}"})
    # a phase whose with block raised is no measurement: no effect from it
    recs = [r for r in data.get("records") or [] if r.get("status", "ok") == "ok"]
    if recs:
        base = recs[0].get("phys_before")
        peaks = [r.get("phys_peak") for r in recs if r.get("phys_peak") is not None]
        if base is not None and peaks:
            out.append({"effect": "peak_above_start", "value": (max(peaks) - base) / MiB,
                        "unit": "MiB", "threshold": None, "passed": None})
        for r in recs:
            returned = derived_figures(r).get("phys_returned")
            if returned is not None:
                out.append({"effect": f"returned_in_{r['phase']}",
                            "value": returned / MiB, "unit": "MiB",
                            "threshold": None, "passed": None})
    return out


_EFFECT_FNS: Dict[str, Optional[Callable[[Mapping[str, Any]], List[Dict[str, Any]]]]] = {}


def _experiment_effects(path: Optional[str]) -> Optional[Callable[..., List[Dict[str, Any]]]]:
    if not path or not os.path.isfile(path) or not path.endswith(".py"):
        return None
    if path not in _EFFECT_FNS:
        from .notebooks import experiment_module
        try:
            mod = experiment_module(path)
            _EFFECT_FNS[path] = getattr(mod, "arm_effects", None)
        except Exception:       # an experiment that does not import here has none
            _EFFECT_FNS[path] = None
    return _EFFECT_FNS[path]


# ---- provenance ----------------------------------------------------------------------------

def _read(path: str, default: str = "") -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return default


def _first_line(cmd: Sequence[str]) -> Optional[str]:
    try:
        p = subprocess.run(list(cmd), capture_output=True, **_CHILD_TEXT, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (p.stdout or p.stderr).strip()
    return text.splitlines()[0] if text else None


def host_info() -> Dict[str, Any]:
    """What a worker's host is: uname, kernel, CPU model, cores, memory, THP
    mode, vm.max_map_count, load average, Python, Lua and C compiler
    versions, heaplab's version.  Runs on each worker (client.run)."""
    cpu = ""
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    mem = None
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            mem = int(line.split()[1]) * 1024
            break
    try:
        import heaplab
        version = heaplab.__version__
    except ImportError:
        version = None
    u = platform.uname()
    return {
        "host": socket.gethostname(), "uname": " ".join(u), "system": u.system,
        "kernel": u.release, "machine": u.machine, "cpu_model": cpu,
        "cores": os.cpu_count(), "memory_bytes": mem,
        "thp": _read("/sys/kernel/mm/transparent_hugepage/enabled") or None,
        "vm_max_map_count": int(_read("/proc/sys/vm/max_map_count", "0")) or None,
        "load_average": list(os.getloadavg()),
        "python": sys.version.split()[0], "python_executable": sys.executable,
        "lua": _first_line(["lua5.4", "-v"]), "compiler": _first_line(["cc", "--version"]),
        "heaplab": version, "pid": os.getpid(),
    }


def _git_commit(start: str) -> Optional[Dict[str, Any]]:
    try:
        p = subprocess.run(["git", "-C", start, "rev-parse", "HEAD"], capture_output=True,
                           **_CHILD_TEXT, timeout=10)
        if p.returncode != 0:
            return None
        dirty = subprocess.run(["git", "-C", start, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, **_CHILD_TEXT, timeout=10).stdout.strip()
        return {"commit": p.stdout.strip(), "dirty": bool(dirty)}
    except (OSError, subprocess.TimeoutExpired):
        return None


def _experiment_git(spec: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The git commit of the experiment file's checkout (None for a command
    sweep, or a file outside any checkout)."""
    f = spec.get("path") or spec.get("script")
    return _git_commit(os.path.dirname(os.path.abspath(f))) if isinstance(f, str) else None


def not_a_run_folder(run_dir: str) -> str:
    """Why `run_dir` is not a sweep run folder, for a message (`run --resume`,
    `compare`): a mistyped path is not "a folder without meta.json"."""
    if not os.path.exists(run_dir):
        return "no such folder"
    if not os.path.isdir(run_dir):
        return "not a folder, so not a sweep run folder"
    return f"not a sweep run folder (no {RUN_META})"


def load_meta(run_dir: str) -> Dict[str, Any]:
    """A run folder's meta.json (SweepError if it is not a run folder)."""
    path = os.path.join(run_dir, RUN_META)
    try:
        with open(path) as f:
            meta = json.load(f)
    except OSError:
        raise SweepError(f"{run_dir}: {not_a_run_folder(run_dir)}") from None
    except ValueError as e:
        raise SweepError(f"{path}: not JSON ({e})") from None
    if not isinstance(meta, dict):
        raise SweepError(f"{path}: not a run's {RUN_META} (a JSON object), a "
                         f"{type(meta).__name__}")
    return meta


def meta_value(meta: Mapping[str, Any], run_dir: str, *keys: str) -> Any:
    """meta[keys[0]][keys[1]]...: what --resume reads of a run's meta.json;
    SweepError naming the file and the key when it is not there (a KeyError
    traceback once)."""
    value: Any = meta
    for i, k in enumerate(keys):
        if not isinstance(value, Mapping) or k not in value:
            where = "".join(f"[{x!r}]" for x in keys[:i + 1])
            raise SweepError(f"{os.path.join(run_dir, RUN_META)}: no {where}: not the meta.json "
                             f"of a heaplab run, or damaged; cannot resume it")
        value = value[k]
    return value


def _write_json(path: str, data: Any) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomic(path, json.dumps(data))    # a reader never sees half a file


def record_path(run_dir: str, task: Mapping[str, Any]) -> str:
    """Where a task's record lives in its run folder."""
    return os.path.join(run_dir, task["experiment"], task["cell"],
                        f"{arm_file_stem(task['arm'])}.r{task['repeat']}.json")


def complete_records(run_dir: str, skipped: Optional[List[Tuple[str, str]]] = None,
                     tasks: Optional[Iterable[Mapping[str, Any]]] = None
                     ) -> Dict[str, Dict[str, Any]]:
    """{task key: record} of the records in a run folder that are complete:
    JSON with status ok and at least one phase record.

    A record file that cannot be read or is not JSON raises ValueError
    naming it, as load_arms does; with a list as `skipped` each such file is
    appended to it as (path, reason) and left out (its task is not
    complete), and a warning names it.

    With `tasks` (the run's tasks, as --resume passes them) a record is
    complete only for the task it was run as: one whose cell values or
    environment differ from its task's (another grid or another --env filed
    under the same key) is not complete -- a warning names it, and its task
    runs again."""
    out = {}
    by_key = {str(t["key"]): t for t in tasks} if tasks is not None else None
    for path in sorted(glob.glob(os.path.join(run_dir, "*", "*", "*.r*.json"))):
        data = load_json_record(path, skipped, "complete_records")
        if not isinstance(data, dict):
            continue
        sw = data.get("sweep") or {}
        if sw.get("status") == "ok" and data.get("records"):
            if by_key is not None and sw.get("key") in by_key:
                why = _not_the_task(sw, by_key[sw["key"]])
                if why:
                    import warnings
                    warnings.warn(f"heaplab: {path}: {why}: not a record of this run's task "
                                  f"{sw['key']}; it runs again", stacklevel=2)
                    continue
            out[sw["key"]] = data
    return out


def _not_the_task(sw: Mapping[str, Any], task: Mapping[str, Any]) -> Optional[str]:
    """Why a record's sweep block is not a run of `task` (None when it is)."""
    values = sw.get("values")
    if values != task.get("values"):
        return f"cell values {values} where the run's cell {task.get('cell')} is {task.get('values')}"
    env = sw.get("env") or {}
    differ = {k: v for k, v in (task.get("env") or {}).items() if env.get(k) != v}
    if differ:
        return f"run without the task's environment {differ} (it had " \
               f"{ {k: env.get(k) for k in differ} })"
    return None


# ---- building a sweep --------------------------------------------------------------------------

class Sweep:
    """An expanded sweep: the tasks, the grid and what meta.json records."""

    def __init__(self, experiment: str, kind: str, tasks: List[Task], grid: Dict[str, List[str]],
                 cells: List[Tuple[str, Dict[str, str]]], arms: List[str], repeat: int,
                 spec: Dict[str, Any]) -> None:
        self.experiment, self.kind, self.tasks = experiment, kind, tasks
        self.grid, self.cells, self.arms, self.repeat, self.spec = grid, cells, arms, repeat, spec
        #: --env, --arm-env and --timeout: meta.json keeps them for --resume
        self.env: Dict[str, str] = {}
        self.arm_env: Dict[str, Dict[str, str]] = {}
        self.timeout: float = 600


def _lua_arms(script: str) -> List[str]:
    lua = shutil.which("lua5.4")
    if lua is None:
        raise SweepError("lua5.4 is not installed (tools/setup.sh installs it)")
    p = subprocess.run([lua, script], capture_output=True, **_CHILD_TEXT, timeout=60,
                       env={**os.environ, "LUA_PATH": os.path.join(os.path.dirname(script),
                                                                   "?.lua") + ";;",
                            **({"LUA_CPATH": _lua_cpath()} if _lua_cpath() else {})})
    msg = p.stderr
    if "(arms:" not in msg:
        # the reason is the first line (lua5.4's "module 'heaplab' not found:"),
        # then the long list of files it tried: the last 300 characters cut
        # the reason off (the installation hunt, session 26)
        lines = msg.strip().splitlines()
        why = " / ".join(ln.strip() for ln in lines[:3])[:400]
        if "module 'heaplab' not found" in msg:
            why += (" -- the Lua module: build it (make, or luarocks) and set HEAPLAB_LUA_CPATH "
                    "to its folder's ?.so pattern, or run from a checkout with a build/")
        raise SweepError(f"{script}: cannot list its arms (exit {p.returncode}): {why}")
    return [a.strip() for a in msg.split("(arms:", 1)[1].split(")", 1)[0].split(",")]


def _lua_cpath() -> Optional[str]:
    if os.environ.get("HEAPLAB_LUA_CPATH"):
        return os.environ["HEAPLAB_LUA_CPATH"]
    d = os.getcwd()
    while True:
        cand = os.path.join(d, os.environ.get("BUILD", "build"), "bindings", "lua", "heaplab.so")
        if os.path.isfile(cand):
            return os.path.join(os.path.dirname(cand), "?.so") + ";;"
        if os.path.dirname(d) == d:
            return None
        d = os.path.dirname(d)


def _python_experiment(name: str, source: Optional[str] = None) -> Tuple[Any, str, str]:
    """(Experiment, module path, module variable) for e1 / E4b / a path; or
    the experiment `name` of the module file `source` (a resume: the file
    the run found)."""
    from .notebooks import NotAModule, experiment_module
    base = name
    tries = [name] if source is None else [source]
    stripped = name.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    if source is None and stripped != name and stripped[-1:].isdigit():
        tries.append(stripped)            # e4b: the module of e4, experiment E4b
    last: Optional[Exception] = None
    for t in tries:
        try:
            mod = experiment_module(t)
        except (FileNotFoundError, NotAModule) as e:
            last = e
            continue
        except ModuleNotFoundError as e:
            # (a traceback: E6, E9 and E10 import pytest, which heaplab[sweep]
            # did not install -- the installation hunt, session 26)
            raise SweepError(f"experiment {name}: its file imports {e.name!r}, which is not "
                             f"installed (pip install {e.name}; heaplab[sweep] and "
                             f"heaplab[notebooks] bring pytest)") from None
        exps = {k: v for k, v in vars(mod).items() if isinstance(v, Experiment)}
        if not exps:
            raise SweepError(f"{mod.__file__}: no Experiment in it")
        want = [k for k, v in exps.items() if v.name.lower() == base.lower()
                or k.lower() == base.lower()]
        if not want and len(exps) == 1 and t in (name, source):
            want = list(exps)
        if not want:
            raise SweepError(f"{name}: {os.path.basename(mod.__file__)} holds experiments "
                             f"{sorted(v.name for v in exps.values())}; name one of them")
        exp = exps[want[0]]
        return exp, os.path.abspath(mod.__file__), want[0]
    raise SweepError(str(last))


def build_sweep(experiment: Optional[str], arms: Optional[Sequence[str]] = None,
                grid: Optional[Dict[str, List[str]]] = None, repeat: int = 1,
                command: Optional[str] = None, arm_env: Optional[Dict[str, Dict[str, str]]] = None,
                env: Optional[Dict[str, str]] = None, timeout: float = 600,
                run_id: Optional[str] = None, source: Optional[str] = None,
                cwd: Optional[str] = None) -> Sweep:
    """Expand a sweep: experiment is 'e1', 'E4b', a path to an experiment
    module, 'lua:e1_page_floor' (or a .lua path), or None with `command`
    (a command line with {arm} where the arm's name goes).  Every cell x arm
    x repeat becomes a Task, run in `cwd` (default: the current directory).
    source: the experiment's file (a resume: the Python module or Lua script
    the run found, whatever its name resolves to now).  SweepError names
    what is wrong."""
    grid = dict(grid or {})
    arm_env = dict(arm_env or {})
    env = dict(env or {})
    # every HEAPLAB_ name is one heaplab reads, and an option's variable of
    # --env/--arm-env has a value the library takes (parse_set reads the
    # grid's values): a bad one failed, or did nothing in, every task
    for n in grid:
        _check_variable_name("--set", n)
    for where, e in [("--env", env)] + [(f"--arm-env {a}:", v) for a, v in arm_env.items()]:
        for n, value in e.items():
            _check_variable_name(where, n)
            _check_option_variable(where, n, value)
    if repeat < 1:
        raise SweepError(f"--repeat {repeat}: expected >= 1")
    if not timeout > 0 or timeout == float("inf"):
        # (a negative one failed every task at once, 0 was taken as 600)
        raise SweepError(f"--timeout {timeout}: expected a number of seconds > 0")
    if arms is not None and not list(arms):
        raise SweepError("--arms names no arm (leave it out to run them all)")
    spec: Dict[str, Any] = {}
    if command:
        kind = "command"
        argv = shlex.split(command)
        if not argv:
            raise SweepError("--command is empty")
        if not arms:
            raise SweepError("--command needs --arms (the names put in place of {arm})")
        exp_name = experiment or os.path.basename(argv[0])
        try:
            # (it names a folder of the run: '../../x' wrote the records outside
            # it, 'foo/bar' where neither --resume nor report looked)
            _name("the experiment's name", exp_name)
        except ValueError as e:
            raise SweepError(str(e)) from None
        arm_names = list(arms)
        spec.update(argv=argv)
    elif experiment is None:
        raise SweepError("name an experiment (e1, E4b, lua:e1_page_floor) or give --command")
    elif experiment.startswith("lua:") or experiment.endswith(".lua"):
        kind = "lua"
        name = experiment[4:] if experiment.startswith("lua:") else experiment
        if source is not None:
            script = os.path.abspath(source)
        elif os.path.isfile(name):
            script = os.path.abspath(name)
        else:
            from .notebooks import experiments_dir
            script = os.path.join(experiments_dir(), "lua",
                                  name if name.endswith(".lua") else name + ".lua")
            if not os.path.isfile(script):
                have = sorted(os.path.basename(p) for p in
                              glob.glob(os.path.join(os.path.dirname(script), "e*.lua")))
                raise SweepError(f"no Lua experiment {name!r} (have: {have})")
        known = _lua_arms(script)
        arm_names = list(arms) if arms else known
        bad = [a for a in arm_names if a not in known]
        if bad:
            raise SweepError(f"{os.path.basename(script)}: no arm(s) {bad} (arms: {known})")
        exp_name = "lua:" + os.path.splitext(os.path.basename(script))[0]
        spec.update(script=script, lua_cpath=_lua_cpath())
        # the Python twin's arm_effects reads the Lua arms' records too
        import re
        m = re.match(r"(e\d+[a-z]?)_", os.path.basename(script))
        if m:
            try:
                from .notebooks import experiments_dir
                twin = glob.glob(os.path.join(experiments_dir(), f"test_{m.group(1)}_*.py"))
                if len(twin) == 1:
                    spec["experiment_path"] = twin[0]
            except FileNotFoundError:
                pass
    else:
        kind = "python"
        exp, path, var = _python_experiment(experiment, source)
        arm_names = list(arms) if arms else list(exp.arms)
        bad = [a for a in arm_names if a not in exp.arms]
        if bad:
            raise SweepError(f"experiment {exp.name}: no arm(s) {bad} (arms: {list(exp.arms)})")
        # (an option given as its variable, HEAPLAB_PAGE_RELEASE, too)
        clash = sorted({n for n in grid for a in arm_names
                        if _option_of(n) in exp.arms[a]["options"]})
        if clash:
            raise SweepError(f"--set {', '.join(clash)}: the arms set that option themselves "
                             f"(arm options win over the grid); sweep another option, or pick "
                             f"arms with --arms")
        exp_name = exp.name
        spec.update(path=path, var=var, experiment_path=path)
    try:
        # (tasks of one name ran once and counted twice: Dask keeps one of
        # each key, and their records were one file)
        check_arm_names("--arms" if arms else exp_name, arm_names)
    except ValueError as e:
        raise SweepError(str(e)) from None
    for a in arm_env:     # (any kind's: a Python or Lua arm's misspelt name was ignored)
        if a not in arm_names:
            raise SweepError(f"--arm-env {a}: not one of the arms {arm_names}")
    cells = expand_grid(grid)
    run_id = run_id or new_run_id(exp_name)
    tasks = []
    # repeats outermost and arms innermost: the arms of a cell run side by
    # side in time, and a repeat is spread over the whole sweep's duration
    for rep in range(repeat):
        for cell, values in cells:
            for a in arm_names:
                task_env = {**env, **{env_name(k): v for k, v in values.items()},
                            **arm_env.get(a, {})}
                key = f"{exp_name.replace(':', '-')}-{cell}-{a.replace('/', '_')}-r{rep}"
                tasks.append(Task(key=key, run_id=run_id, experiment=exp_name, kind=kind, arm=a,
                                  cell=cell, values=values, repeat=rep, env=task_env,
                                  timeout=timeout, cwd=cwd or os.getcwd(), **spec))
    sw = Sweep(exp_name, kind, tasks, grid, cells, arm_names, repeat, spec)
    sw.env, sw.arm_env, sw.timeout = env, arm_env, timeout
    return sw


def new_run_id(what: str = "") -> str:
    """A run id: local time to the second and a short hash (time, pid, what)."""
    now = datetime.datetime.now()
    h = hashlib.sha1(f"{now.isoformat()} {os.getpid()} {what} {time.monotonic_ns()}".encode())
    return f"{now:%Y%m%d-%H%M%S}-{h.hexdigest()[:6]}"


# ---- running it -------------------------------------------------------------------------------

class _Display:
    """Progress: a live rich display on a terminal, plain lines otherwise."""

    def __init__(self, total: int, done: int, live: bool, stream: Any = None) -> None:
        self.total, self.done, self.failed = total, done, 0
        self.t0 = time.monotonic()
        self.started_done = done
        self.stream = stream or sys.stdout
        self.running: Dict[str, str] = {}
        self.live = None
        if live:
            try:
                from rich.console import Console
                from rich.live import Live
                self.console = Console(file=self.stream)
                self.live = Live(self._render(), console=self.console, refresh_per_second=4,
                                 transient=False)
                self.live.start()
            except ImportError:
                self.live = None

    def eta(self) -> str:
        n = self.done - self.started_done
        if n <= 0:
            return "?"
        rate = (time.monotonic() - self.t0) / n
        s = int(rate * (self.total - self.done))
        return f"{s // 60}m{s % 60:02d}s"

    def _render(self) -> Any:
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        t = Table.grid(padding=(0, 1))
        t.add_row(ProgressBar(total=self.total, completed=self.done, width=40),
                  f"{self.done}/{self.total} tasks", f"failed {self.failed}", f"ETA {self.eta()}")
        from rich.text import Text
        for w, key in sorted(self.running.items()):
            t.add_row("", Text(w, style="dim"), Text(key), "")
        return t

    def update_running(self, running: Dict[str, str]) -> None:
        self.running = running
        if self.live is not None:
            self.live.update(self._render())

    def finished(self, rec: Dict[str, Any]) -> None:
        self.done += 1
        sw = rec["sweep"]
        if sw["status"] != "ok":
            self.failed += 1
        line = (f"[{self.done}/{self.total}] {sw['key']} {sw['status']} {sw['seconds']:.1f} s"
                f" on {sw.get('worker') or sw['host']}; failed {self.failed}, ETA {self.eta()}")
        if sw["status"] != "ok":
            line += f"\n    {sw['error']}"
        if self.live is not None:
            self.live.console.print(line, markup=False, highlight=False)
            self.live.update(self._render())
        else:
            print(line, file=self.stream, flush=True)

    def stop(self) -> None:
        if self.live is not None:
            self.running = {}
            self.live.update(self._render())
            self.live.stop()


def _cluster(cluster: str, workers: int, per_worker: int) -> Tuple[Any, Any, str]:
    """(client, local cluster or None, address)."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise SweepError("sweeps need Dask's distributed: pip install 'heaplab[sweep]'") from None
    if cluster in ("local", "", None):
        # the workers ignore the terminal's Ctrl-C (dask_setup below, their
        # preload), and until then it is held: they start with SIGINT and
        # SIGHUP blocked -- the threads that spawn them inherit this
        # thread's mask, and they theirs through the exec.  One that came
        # while a worker imported distributed killed it: "Nanny failed to
        # start", two tracebacks, exit 1.  Here the stop is held until the
        # mask is restored (then _stops_deferred keeps it).  (multiprocessing's
        # resource tracker, started by the first worker's spawn, unblocked
        # SIGINT in the spawning thread: it is started first, here.)
        # Started with SIGHUP blocked as well (it blocks SIGINT and SIGTERM
        # itself): a terminal's hang-up killed it, and the run's close
        # printed "resource_tracker: process died unexpectedly" and a
        # KeyError traceback for each of its semaphores.
        from multiprocessing import resource_tracker
        old = signal.pthread_sigmask(signal.SIG_BLOCK, _WORKER_SIGNALS)
        try:
            with contextlib.suppress(Exception):
                resource_tracker.ensure_running()
            signal.pthread_sigmask(signal.SIG_BLOCK, _WORKER_SIGNALS)   # (see above)
            lc = LocalCluster(n_workers=workers, threads_per_worker=per_worker, processes=True,
                              resources={"arm": per_worker}, dashboard_address=":0",
                              host="127.0.0.1", silence_logs=40, preload=["heaplab.sweep"])
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return Client(lc), lc, lc.scheduler_address
    if not cluster.startswith(("tcp://", "tls://")):
        raise SweepError(f"--cluster {cluster!r}: expected local or tcp://HOST:PORT")
    try:
        client = Client(cluster, timeout=30)
    except (OSError, TimeoutError) as e:
        raise SweepError(f"--cluster {cluster}: cannot reach the scheduler ({e})") from None
    try:
        client.wait_for_workers(1, timeout=60)
    except TimeoutError:
        client.close()
        raise SweepError(f"--cluster {cluster}: no worker joined the scheduler within 60 s "
                         "(start some: dask worker ADDRESS --nthreads 1 --resources arm=1)") from None
    return client, None, cluster


#: the signals a local cluster's workers leave to the run (dask_setup)
_WORKER_SIGNALS = {signal.SIGINT, signal.SIGHUP}


def _no_op(signum: int, frame: Any) -> None:
    pass


def dask_setup(worker: Any) -> None:
    """A local cluster's worker at its start (its preload): SIGINT and
    SIGHUP ignored -- by a handler that does nothing (an ignored signal is
    ignored by every process the worker starts: its tasks' processes
    too), not where they were ignored already (`nohup`, `&`) -- then
    unblocked (_cluster blocked them until now).  A terminal's Ctrl-C (or its hang-up) reaches the
    whole foreground process group -- the workers too, which the run
    stops itself once it has killed their tasks: each worker's loop raised
    KeyboardInterrupt, printed a traceback and closed, and the run's
    clean-up waited for the closing workers (4 s, or 30 s trying to reach
    one that was gone: distributed's connect timeout).  A worker still
    dies with the run (SIGKILL included): distributed's own watch of its
    parent."""
    with contextlib.suppress(ValueError, OSError):   # (not the main thread)
        for signum in _WORKER_SIGNALS:
            if signal.getsignal(signum) is not signal.SIG_IGN:
                signal.signal(signum, _no_op)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WORKER_SIGNALS)


class Stopped(KeyboardInterrupt):
    """SIGTERM or SIGHUP while a sweep runs (`stop_on_signals`): stops it as
    Ctrl-C does -- what ran is on disk and meta.json says where it stopped
    -- where the signal's default action killed the process at once (no
    counts in meta.json, the cluster's processes left to die on their own)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    def __reduce__(self) -> Tuple[Any, ...]:
        # made again from its signal number, not from args (the signal's
        # name, which Stopped() refused: copy and pickle raised ValueError)
        return type(self), (self.signum,), self.__dict__


@contextlib.contextmanager
def stop_on_signals(signums: Sequence[int] = (signal.SIGTERM, signal.SIGHUP)) -> Iterator[None]:
    """While it lasts, each of `signums` raises Stopped in the main thread.
    A signal the process ignores stays ignored (`nohup heaplab run ...`
    survives its terminal)."""
    def stop(signum: int, frame: Any) -> None:
        raise Stopped(signum)
    with _signals_handled(signums, stop, lambda h: h is not signal.SIG_IGN):
        yield


class _Pending:
    signum: Optional[int] = None

    def raise_it(self) -> None:
        if self.signum == signal.SIGINT:
            raise KeyboardInterrupt
        if self.signum is not None:
            raise Stopped(self.signum)


@contextlib.contextmanager
def _stops_deferred() -> Iterator[_Pending]:
    """While a local cluster starts: a stop (Ctrl-C, or SIGTERM/SIGHUP under
    stop_on_signals) is kept, for the caller to raise (_Pending.raise_it)
    once the cluster is up, inside the try that closes it.  Raised in the
    middle of LocalCluster(...), it left a half-built cluster to
    distributed's atexit, which printed an AssertionError traceback (the
    review, session 25).  Signals whose handler is no Python function
    (ignored, or their default action) are left alone."""
    pending = _Pending()

    def keep(signum: int, frame: Any) -> None:
        if pending.signum is None:
            pending.signum = signum
    with _signals_handled((signal.SIGINT, signal.SIGTERM, signal.SIGHUP), keep, callable):
        yield pending


def stop_signal(e: BaseException) -> int:
    """The signal that stopped a sweep: Stopped's, else SIGINT (Ctrl-C)."""
    return getattr(e, "signum", signal.SIGINT)


def _lock_run(run_dir: str, locks: List[int]) -> None:
    """Hold the run folder for this invocation (a lock file in it, flock):
    two --resume of one folder at once ran every missing task twice, and
    the last to write meta.json dropped the other's entry.  A second one is
    refused; the lock goes with the process, however it ends."""
    import fcntl
    fd = os.open(os.path.join(run_dir, ".heaplab-run.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise SweepError(f"{run_dir}: another heaplab run is using this run folder (the run "
                         f"itself, or a --resume of it); wait for it to end") from None
    locks.append(fd)


def run_sweep(sweep: Sweep, results: str = "results", cluster: str = "local", workers: int = 2,
              per_worker: int = 1, resume: Optional[str] = None, argv: Optional[List[str]] = None,
              progress: Optional[bool] = None, stream: Any = None) -> Tuple[str, Dict[str, int]]:
    """Run every task of `sweep` on Dask and write the run folder; returns
    (run folder, {"ok": n, "failed": n, "skipped": n}).  resume: an
    existing run folder whose complete records are kept (their tasks are
    not run again).  One invocation at a time uses a run folder
    (SweepError for a second)."""
    locks: List[int] = []
    try:
        return _run_sweep(sweep, results, cluster, workers, per_worker, resume, argv, progress,
                          stream, locks)
    finally:
        for fd in locks:
            os.close(fd)


def _run_sweep(sweep: Sweep, results: str, cluster: str, workers: int, per_worker: int,
               resume: Optional[str], argv: Optional[List[str]], progress: Optional[bool],
               stream: Any, locks: List[int]) -> Tuple[str, Dict[str, int]]:
    if workers < 1 or per_worker < 1:
        raise SweepError("--workers and --per-worker must be >= 1")
    if resume:
        # the folder itself, not a link to it: RESULTS/latest given as the
        # run made `latest` a link to itself (_point_latest below), and the
        # final update of meta.json failed on it (ELOOP)
        run_dir = os.path.realpath(resume)
        meta = load_meta(run_dir)
        _lock_run(run_dir, locks)
        # a record that is not JSON (damaged) is no complete task: it is run
        # again and its file replaced; a warning names it
        done = complete_records(run_dir, skipped=[], tasks=sweep.tasks)
        for t in sweep.tasks:
            t["run_id"] = meta_value(meta, run_dir, "run_id")
    else:
        run_id = sweep.tasks[0]["run_id"] if sweep.tasks else new_run_id()
        run_dir = os.path.abspath(os.path.join(results, run_id))
        if os.path.exists(run_dir):
            raise SweepError(f"{run_dir} exists: nothing is overwritten")
        done = {}
        meta = {
            "run_id": run_id, "created": datetime.datetime.now().astimezone().isoformat(
                timespec="seconds"),
            "command_line": argv if argv is not None else sys.argv,
            "cwd": os.getcwd(), "experiment": sweep.experiment, "kind": sweep.kind,
            "arms": sweep.arms, "grid": sweep.grid,
            "cells": {c: v for c, v in sweep.cells}, "repeat": sweep.repeat,
            "env": sweep.env, "arm_env": sweep.arm_env, "timeout": sweep.timeout,
            "spec": {k: v for k, v in sweep.spec.items()},
            "tasks": len(sweep.tasks), "heaplab": _heaplab_version(),
            # heaplab's own checkout (null for an installed package), and the
            # one the experiment file is in (the user's repository, for an
            # experiment of their own): the working directory's said neither
            # (the installation hunt, session 26)
            "git": _git_commit(os.path.dirname(os.path.abspath(__file__))),
            "experiment_git": _experiment_git(sweep.spec),
            "client": host_info(),
        }
    todo = [t for t in sweep.tasks if t.key not in done]
    # a folder may also hold failed records of these tasks: they are replaced
    # the results folder is checked before a cluster starts (a file there
    # gave a NotADirectoryError traceback once the workers were up)
    parent = os.path.dirname(run_dir)
    _make_folder(parent, f"--results {parent}", SweepError)
    if not os.access(parent, os.W_OK | os.X_OK):
        raise SweepError(f"--results {parent}: not writable")
    # A stop (Ctrl-C, SIGTERM, SIGHUP) while the cluster starts and the run's
    # meta.json is written waits for them: raised inside LocalCluster(...) it
    # left a half-built cluster to distributed's atexit (an AssertionError
    # traceback), inside a call to the scheduler a tornado one, and a fresh
    # run folder holding only its lock file.  It is raised once the run is
    # on disk, where Ctrl-C is handled (meta.json says where it stopped).
    deferred = _stops_deferred()
    stop = deferred.__enter__()
    try:
        client, local, address = _cluster(cluster, workers, per_worker)
    except BaseException:
        deferred.__exit__(None, None, None)
        raise
    counts = {"ok": 0, "failed": 0, "skipped": len(sweep.tasks) - len(todo)}
    stopped = False
    futures: Dict[Any, Any] = {}
    after_stop = contextlib.ExitStack()     # (a stop's clean-up: see below)
    try:
        try:
            os.makedirs(run_dir, exist_ok=True)  # only once a cluster answered
            if not resume:
                _lock_run(run_dir, locks)    # (a resume took it before reading the records)
            has_arm = [w for w, i in client.scheduler_info()["workers"].items()
                       if "arm" in (i.get("resources") or {})]
            resources = {"arm": 1} if has_arm else None
            before, unanswered = _workers_info(client)
            run_meta = {"cluster": address, "started": datetime.datetime.now().astimezone()
                        .isoformat(timespec="seconds"), "workers_before": before,
                        "one_arm_per_worker": bool(has_arm), "tasks_run": len(todo),
                        "tasks_skipped": counts["skipped"]}
            if unanswered:
                run_meta["workers_unanswered_before"] = unanswered
            meta.setdefault("runs", []).append(run_meta)
            _write_json(os.path.join(run_dir, RUN_META), meta)
            _point_latest(os.path.dirname(run_dir), os.path.basename(run_dir))
        finally:
            deferred.__exit__(None, None, None)
        if progress is None:
            progress = (stream or sys.stdout).isatty()
        display = _Display(len(sweep.tasks), counts["skipped"], live=progress, stream=stream)
        try:
            stop.raise_it()                  # (kept while the run started)
            # in task order (repeats outermost): the scheduler runs the
            # highest priority first
            futures = {client.submit(run_task, dict(t), key=t.key, pure=False,
                                     resources=resources, priority=len(todo) - i): t
                       for i, t in enumerate(todo)}
            from distributed import wait
            pending = set(futures)
            while pending:
                try:
                    finished = wait(list(pending), timeout=0.5, return_when="FIRST_COMPLETED").done
                except TimeoutError:        # nothing finished in this half second
                    finished = set()
                for f in finished:
                    pending.discard(f)
                    t = futures[f]
                    try:
                        rec = f.result()
                    except Exception as e:      # the task itself could not run anywhere
                        rec = {"experiment": t["experiment"], "arm": t["arm"], "records": [],
                               "notes": {}, "series": [], "options": {}, "params": {},
                               "error": repr(e), "repeat": t["repeat"], "cell": t["cell"],
                               "effects_numeric": [],
                               "sweep": {"key": t.key, "cell": t["cell"], "values": t["values"],
                                         "repeat": t["repeat"], "arm": t["arm"],
                                         "experiment": t["experiment"], "status": "failed",
                                         "error": f"the task failed on every worker: {e!r}",
                                         "stderr_tail": "", "seconds": 0.0, "worker": None,
                                         "host": None, "run_id": t["run_id"]}}
                    _write_json(record_path(run_dir, t), rec)
                    counts[rec["sweep"]["status"]] += 1
                    display.finished(rec)
                if display.live is not None:
                    try:
                        proc = client.processing()
                        running = {w: ", ".join(str(k) for k in keys) for w, keys in proc.items()
                                   if keys}
                    except Exception:
                        running = {}
                    display.update_running(running)
        except KeyboardInterrupt as e:
            # From here to the cluster's close a further stop (Ctrl-C twice,
            # SIGTERM, SIGHUP) is noted, not raised: raised, it landed
            # wherever the main thread was -- once inside logging's
            # _acquireLock, after the lock was taken and before the try that
            # releases it (the loggers quieted below), and the lock stayed
            # this thread's: the scheduler's thread and the nannies' waited
            # for it for good, and the client's and the cluster's close each
            # waited out CLOSE_WAIT_S (43 s from the first Ctrl-C to the
            # exit, session 39).  The clean-up is bounded (STOP_WAIT_S,
            # CLOSE_WAIT_S): the first stop is the one that ends the run.
            after_stop.enter_context(_stops_deferred())
            # what ran is on disk; meta.json says the run stopped here, and
            # the caller says how to go on (heaplab run: --resume RUN) --
            # known first: a second Ctrl-C in the write below lost the run
            # folder ('interrupted' alone) and the clean-up
            e.run_dir = run_dir         # type: ignore[attr-defined]
            stopped = True
            run_meta.update({"interrupted": datetime.datetime.now().astimezone()
                             .isoformat(timespec="seconds"),
                             "signal": signal.Signals(stop_signal(e)).name,
                             "counts": dict(counts),
                             "tasks_run": counts["ok"] + counts["failed"]})
            _write_json(os.path.join(run_dir, RUN_META), meta)
            raise
        finally:
            display.stop()
        after, unanswered = _workers_info(client)
        run_meta.update({"finished": datetime.datetime.now().astimezone()
                         .isoformat(timespec="seconds"), "workers_after": after,
                         "counts": dict(counts)})
        if unanswered:
            run_meta["workers_unanswered_after"] = unanswered
            if local is not None:
                # (closing it, the cluster waited 4 s for it, then killed it)
                _quiet_distributed()
                nannies = _nannies(local)
                for addr in unanswered:
                    if addr in nannies:
                        _kill_local_worker(nannies[addr])
        _write_json(os.path.join(run_dir, RUN_META), meta)
    except BaseException:
        # stopped before a fresh run's meta.json was written: no run folder
        # holding a lock file only (nothing to resume, nothing to report)
        if not resume and not os.path.exists(os.path.join(run_dir, RUN_META)):
            shutil.rmtree(run_dir, ignore_errors=True)
        raise
    finally:
        try:
            if stopped and local is not None:
                # the local workers' tasks go now -- those waiting cancelled
                # (a worker would start the next), the running ones' process
                # groups killed in each worker: a worker closing waited 4 s
                # for its task's thread (dask's grace) before it was killed,
                # and its task with it -- each stop of a running sweep took
                # 4 s more
                # (not cut short by a second stop, noted above: cut short,
                # the clean-up left the workers to the cluster's close, which
                # waited for their running tasks -- 10 s)
                with contextlib.suppress(Exception):
                    client.cancel(list(futures))
                _stop_local_tasks(client, local)
        finally:
            # and not cut short by a Ctrl-C (held until it is closed: a
            # second one, quickly after the first, interrupted local.close()
            # and left the cluster to distributed's atexit, which waited for
            # the running tasks' threads -- 10 s)
            try:
                with _ctrl_c_deferred():
                    _close(client, local)
            finally:
                after_stop.close()
    return run_dir, counts


#: how long a stopped local sweep waits for each worker to kill its running
#: tasks' process groups before it kills that worker itself
STOP_WAIT_S = 2.0


def _stop_local_tasks(client: Any, local: Any, limit: float = STOP_WAIT_S) -> None:
    """A stopped local sweep's clean-up (its waiting tasks cancelled
    before): in each worker, the running tasks' process groups killed
    (_kill_live_groups) -- each worker given `limit` seconds to answer.  It
    waited for every worker with no bound: one that could not answer
    (SIGSTOPped, or stuck in a call that holds the interpreter) held the
    stop for good: the broadcast's handshake with it is read with no time
    limit (a run had not exited 500 s after its Ctrl-C).  A worker that did not answer is killed here
    (SIGKILL) with the process groups of its children (its tasks' processes
    and their helpers, which it cannot reap meanwhile), and stderr says so
    -- and names what could not be killed, with how to."""
    nannies = _nannies(local)
    # none of them starts a worker again: one that died (a SIGTERM to the
    # whole group, from a batch system or `kill -- -PGID`) was started
    # again, and the new one, not yet there to answer, was waited for 2 s
    # and killed, with a line saying it had not answered
    for nanny in nannies.values():
        with contextlib.suppress(Exception):
            nanny.close_gracefully()
    alive = {a: n for a, n in nannies.items() if _alive(_pid_of(n) or 0)}
    _quiet_distributed()
    _, failed = _ask_workers(client, _kill_live_groups, sorted(alive), limit)
    for addr, why in failed.items():
        pid, groups, left = _kill_local_worker(nannies[addr])
        if pid is None or (not why.startswith("did not answer") and not left):
            # (its process had ended, or was ending -- its comm closed: a
            # SIGTERM to the whole group; its tasks' processes die with it,
            # PR_SET_PDEATHSIG)
            continue
        _say(sys.stderr, f"heaplab run: worker {addr} (pid {pid}) {why}: killed (SIGKILL)"
                  + (f" with its tasks' process groups {', '.join(map(str, groups))}"
                     if groups else "")
                  + (f"; still there: {_left(left)}" if left else ""))


def _ask_workers(client: Any, fn: Callable[[], Any], addrs: List[str], limit: float
                 ) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """fn run on each worker of addrs (client.run), each given `limit`
    seconds: ({address: what it returned}, {address: why not}).  client.run
    alone waits for every worker with no bound: one that cannot answer
    (SIGSTOPped, or stuck in a call that holds its interpreter) held it for
    good (the handshake with it is read with no time limit)."""
    import asyncio

    async def one(addr: str) -> Tuple[str, Any, Optional[BaseException]]:
        try:
            got = await asyncio.wait_for(client._run(fn, workers=[addr]), limit)
        except Exception as e:          # (asyncio.TimeoutError, a closed comm...)
            return addr, None, e
        return addr, (got or {}).get(addr), None

    async def each() -> List[Tuple[str, Any, Optional[BaseException]]]:
        return list(await asyncio.gather(*(one(a) for a in addrs)))
    try:
        answers = client.sync(each, callback_timeout=limit + 1)
    except Exception as e:
        answers = [(a, None, e) for a in addrs]
    done = {a: r for a, r, e in answers if e is None}
    failed = {a: ("did not answer within %g s (stopped, or stuck in a call?)" % limit
                  if isinstance(e, (asyncio.TimeoutError, TimeoutError))
                  else f"could not be asked ({type(e).__name__}: {e})")
              for a, r, e in answers if e is not None}
    return done, failed


#: how long each worker is given to say what its host is (meta.json)
HOST_INFO_WAIT_S = 5.0


def _workers_info(client: Any) -> Tuple[Dict[str, Any], Dict[str, str]]:
    """host_info of every worker the scheduler knows (_ask_workers), and
    a stderr line for each one that did not answer: with no bound, an idle
    worker SIGSTOPped held a sweep whose tasks had all ended for good (its
    meta.json never said it had finished), or its start."""
    try:
        addrs = sorted(client.scheduler_info()["workers"])
    except Exception:
        addrs = []
    info, failed = _ask_workers(client, host_info, addrs, HOST_INFO_WAIT_S)
    for addr, why in failed.items():
        _say(sys.stderr, f"heaplab run: warning: worker {addr} {why}: meta.json has no host "
                         "information of it (the run's `workers_unanswered_*`)")
    return info, failed


#: how long the client's close, then the local cluster's, may take
CLOSE_WAIT_S = 15.0


def _close(client: Any, local: Any) -> None:
    """The client closed, then the local cluster, each given CLOSE_WAIT_S
    (distributed's own bound: the client's comm timeout twice, 60 s, and
    none for the cluster); a local cluster that did not close in time has
    its workers killed with their tasks' groups, and stderr says so."""
    try:
        client.close(timeout=CLOSE_WAIT_S)
    except TimeoutError:
        _say(sys.stderr, f"heaplab run: warning: the Dask client did not close within "
                         f"{CLOSE_WAIT_S:g} s")
    if local is None:
        return
    try:
        local.close(timeout=CLOSE_WAIT_S)
    except TimeoutError:
        _quiet_distributed()
        killed = []
        for addr, nanny in _nannies(local).items():
            pid, groups, left = _kill_local_worker(nanny)
            if pid is not None:
                killed.append(f"{addr} (pid {pid})" + (f", still there: {_left(left)}"
                                                       if left else ""))
        _say(sys.stderr, f"heaplab run: warning: the local cluster did not close within "
                         f"{CLOSE_WAIT_S:g} s" + (f": its workers killed (SIGKILL) with their "
                                                   f"tasks' groups: {'; '.join(killed)}"
                                                   if killed else ""))


def _quiet_distributed() -> None:
    """distributed's loggers quiet from here on: the scheduler's broadcast
    to a worker killed by the run logs an ERROR with the connection reset,
    and a nanny its worker's death -- the run's own doing, said by it.  And
    tornado's: a second Ctrl-C in distributed's sync() before its call had
    started logged a NameError traceback (its cancel callback)."""
    import logging
    for name in ["tornado.application", *logging.root.manager.loggerDict]:
        if name.startswith(("distributed", "tornado.application")):
            logging.getLogger(name).setLevel(logging.CRITICAL)


def _left(pids: List[int]) -> str:
    """What is left after a kill, and how to end it."""
    return f"{', '.join(map(str, pids))} (kill -KILL {' '.join(map(str, pids))})"


def _nannies(local: Any) -> Dict[str, Any]:
    """{worker address: its nanny} of a local cluster."""
    with contextlib.suppress(Exception):
        return {n.worker_address: n for n in list(local.workers.values())
                if getattr(n, "worker_address", None)}
    return {}


def _kill_local_worker(nanny: Any) -> Tuple[Optional[int], List[int], List[int]]:
    """_kill_worker of a local worker's process, its nanny told first not
    to start another; (None, [], []) when that process had ended."""
    pid = _pid_of(nanny)
    if pid is None or not _alive(pid):
        return None, [], []
    with contextlib.suppress(Exception):
        nanny.close_gracefully()        # (it restarted a worker that died)
    groups, left = _kill_worker(pid)
    return pid, groups, left


def _pid_of(nanny: Any) -> Optional[int]:
    """The pid of a nanny's worker process (None: none)."""
    with contextlib.suppress(Exception):
        pid = nanny.pid
        return pid if isinstance(pid, int) else None
    return None


def _kill_worker(pid: int) -> Tuple[List[int], List[int]]:
    """SIGKILL the process groups its children lead or joined apart from its
    own (a sweep task's process and its helpers: run_in_group), then the
    process itself.  Its children cannot be reaped meanwhile (it is stopped
    or stuck), so their pids -- the groups' ids -- are still theirs.
    Returns (the groups killed, the pids still there after it)."""
    own = _pgid(pid)
    groups: List[int] = []
    for child in _children(pid):
        g = _pgid(child)
        if g is not None and g != own and g != os.getpgid(0) and g not in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(g, signal.SIGKILL)
                groups.append(g)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)
    # (a killed process is gone once its parent reaps it: the nanny, in
    # this process; a zombie counts as gone)
    deadline = time.monotonic() + 2.0
    left = [pid] + groups
    while left and time.monotonic() < deadline:
        left = [p for p in left if _alive(p)]
        if left:
            time.sleep(0.02)
    return groups, left


def _children(pid: int) -> List[int]:
    out = []
    for d in os.listdir("/proc"):
        stat = _proc_stat(int(d)) if d.isdigit() else None
        if stat is not None and len(stat) > 1 and stat[1] == str(pid).encode():
            out.append(int(d))
    return out


def _pgid(pid: int) -> Optional[int]:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def _alive(pid: int) -> bool:
    """pid is a process that is no zombie."""
    stat = _proc_stat(pid)
    return stat is not None and len(stat) > 0 and stat[0] not in (b"Z", b"X")


def _say(stream: Any, line: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        print(line, file=stream, flush=True)


def _heaplab_version() -> Optional[str]:
    try:
        import heaplab
        return heaplab.__version__
    except ImportError:
        return None


def _point_latest(results: str, run_id: str) -> None:
    """<results>/latest -> run_id (a relative symlink, replaced atomically)."""
    link = os.path.join(results, "latest")
    tmp = f"{link}.tmp{os.getpid()}"
    try:
        if os.path.lexists(tmp):
            os.remove(tmp)
        os.symlink(run_id, tmp)
        os.replace(tmp, link)
    except OSError:
        pass
