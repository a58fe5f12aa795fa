"""Run the analysis notebooks headless.

    python -m heaplab.notebooks [PATH ...] [--out DIR] [--check] [--timeout S] [-p NAME=VALUE]
    python -m heaplab.notebooks --strip PATH ...

Every notebook (PATH: a notebook or a folder of them; docs/notebooks by
default) is executed top to bottom with nbclient in a fresh kernel whose
working directory is the notebook's folder.  The executed copy goes to
<folder>/_build/<name>.ipynb (git-ignored) and every PNG it displayed to
<folder>/_build/<name>/<NN>_<tag>.png, named after the cell's first tag
(e.g. `figure-footprint`) or its position.  A notebook that raises stops
there; the rest still run, and the exit status is 1.

--check is what `make test` runs: the same, and additionally a notebook
fails when it displays no figure, prints a warning on stderr, or when the
committed file carries outputs (executed notebooks belong in _build/, not
in git; --strip clears them).

Each notebook's protocol sizes are assigned in one cell tagged `parameters`
(papermill's convention, so papermill runs them too); `--param NAME=VALUE`
(repeatable) adds a cell after it that overrides them, e.g.
`python -m heaplab.notebooks docs/notebooks/e1_page_floor.ipynb -p SIZE_MIB=192`.
The kernel is reached over IPC sockets in a private temporary folder, not
TCP (ipykernel warns about unencrypted TCP, and there is no need for it).

Live arms run from a notebook write their JSON under _build/results
(HEAPLAB_RESULTS), never into the repository's results/.

A notebook that cannot run on this machine (E9 without redis-server) calls
skip("why") in its first cells: the runner stops it there and reports it as
skipped with the reason (`skip` in its line), not as a failure, and --check
does not ask a skipped notebook for a figure.

Notebooks import an experiment module with experiment_module("e1"), which
finds experiments/test_e1_*.py from the notebook's folder upwards (or under
$HEAPLAB_EXPERIMENTS, or, outside a checkout, in the copy installed with the
package: heaplab/experiments).
"""
from __future__ import annotations

import argparse
import base64
import glob
import importlib.util
import os
import shutil
import signal
import sys
import time
import types
from typing import Any, Dict, List, Optional, Sequence

BUILD = "_build"


# ---- used from inside a notebook ------------------------------------------------------

class NotebookSkipped(Exception):
    """Raised by skip(): the notebook cannot run on this machine."""


def skip(reason: str) -> None:
    """Stop the notebook here because it cannot run on this machine (a program
    it drives is not installed).  Interactively this is an exception with
    the reason; `python -m heaplab.notebooks` reports the notebook as
    skipped with the reason, not as failed."""
    raise NotebookSkipped(reason)


#: the experiments installed with the package (heaplab/experiments)
PACKAGE_EXPERIMENTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "experiments")


def experiments_dir(start: Optional[str] = None) -> str:
    """The experiments/ folder: $HEAPLAB_EXPERIMENTS, else the nearest
    experiments/ from `start` (the working directory) upwards (a checkout),
    else the copy installed inside the package (heaplab/experiments)."""
    env = os.environ.get("HEAPLAB_EXPERIMENTS")
    if env:
        if not os.path.isdir(env):
            raise FileNotFoundError(f"HEAPLAB_EXPERIMENTS={env}: no such folder")
        return os.path.abspath(env)
    d = os.path.abspath(start or os.getcwd())
    while True:
        cand = os.path.join(d, "experiments")
        if os.path.isdir(cand) and glob.glob(os.path.join(cand, "test_e*.py")):
            return cand
        parent = os.path.dirname(d)
        if parent == d:
            break
        d = parent
    if glob.glob(os.path.join(PACKAGE_EXPERIMENTS, "test_e*.py")):
        return PACKAGE_EXPERIMENTS
    raise FileNotFoundError(f"no experiments/ folder above {start or os.getcwd()} and none "
                            f"installed in {PACKAGE_EXPERIMENTS}; set HEAPLAB_EXPERIMENTS")


class NotAModule(ValueError):
    """experiment_module: the path names a file that is not a Python module."""


def experiment_module(name: str, start: Optional[str] = None) -> types.ModuleType:
    """Import an experiment module by its short name ("e1" finds
    experiments/test_e1_*.py) or by path, the way the harness child does, so
    that Experiment.run() can spawn its arms.  Returns the module.
    FileNotFoundError when there is no such file; NotAModule (a ValueError)
    when the path is a file that is not a Python module (no .py)."""
    if os.path.sep in name or name.endswith(".py"):
        path = os.path.abspath(name)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"{name}: no such experiment file")
    else:
        folder = experiments_dir(start)
        found = sorted(glob.glob(os.path.join(folder, f"test_{name.lower()}_*.py")))
        if len(found) != 1:
            have = sorted(os.path.basename(p)
                          for p in glob.glob(os.path.join(folder, "test_e*.py")))
            raise FileNotFoundError(f"experiment {name!r}: expected one "
                                    f"{folder}/test_{name.lower()}_*.py, found {len(found)} "
                                    f"(experiments: {have})")
        path = found[0]
    modname = "heaplab_experiment_" + os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(modname, path)
    if spec is None or spec.loader is None:
        # (a path without .py: no loader, and module_from_spec(None) raised
        # AttributeError -- `heaplab run /etc/passwd` gave a traceback)
        raise NotAModule(f"{name}: not a Python module (an experiment is a .py file)")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[modname] = mod          # Experiment.add_arm looks its module up here
    spec.loader.exec_module(mod)
    return mod


# ---- the runner -----------------------------------------------------------------------

def find_notebooks(paths: Sequence[str]) -> List[str]:
    """The notebooks named in `paths` (notebook files, or folders: their
    *.ipynb in name order); FileNotFoundError for anything else."""
    out = []
    for p in paths:
        if os.path.isdir(p):
            out.extend(sorted(q for q in glob.glob(os.path.join(p, "*.ipynb"))))
        elif os.path.isfile(p) and p.endswith(".ipynb"):
            out.append(p)
        elif not os.path.exists(p):
            # (a mistyped path was "not a notebook (.ipynb) or a folder")
            raise FileNotFoundError(f"{p}: no such file or folder")
        else:
            raise FileNotFoundError(f"{p}: not a notebook (.ipynb) or a folder of notebooks")
    return out


def _has_outputs(nb):
    return any(c.get("cell_type") == "code" and (c.get("outputs") or c.get("execution_count"))
               for c in nb.cells)


def strip(path: str) -> bool:
    """Clear a notebook's outputs and execution counts in place; True if it changed."""
    import nbformat
    nb = nbformat.read(path, as_version=4)
    if not _has_outputs(nb):
        return False
    for c in nb.cells:
        if c.get("cell_type") == "code":
            c["outputs"] = []
            c["execution_count"] = None
    nbformat.write(nb, path)
    return True


def _figures(nb, stem, out_dir):
    """Write each image/png output as a file; returns the paths."""
    paths = []
    n = 0
    for ci, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "code":
            continue
        tags = cell.get("metadata", {}).get("tags", [])
        tag = next((t for t in tags if t.startswith("figure")), None)
        k = 0
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if "image/png" not in data:
                continue
            n += 1
            k += 1
            name = tag or f"cell{ci}"
            if k > 1:
                name += f"-{k}"
            path = os.path.join(out_dir, stem, f"{n:02d}_{name}.png")
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(base64.b64decode(data["image/png"]))
            paths.append(path)
    return paths


def _error_of(nb):
    for ci, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                return ci, f"{o.get('ename')}: {o.get('evalue')}"
    return None


PARAMETERS_TAG = "parameters"
INJECTED_TAG = "injected-parameters"


def parameters_cell(nb: Any) -> Optional[int]:
    """The index of the notebook's cell tagged `parameters` (papermill's
    convention: the protocol sizes a run may change), or None."""
    for i, c in enumerate(nb.cells):
        if c.get("cell_type") == "code" and PARAMETERS_TAG in c.get("metadata", {}).get("tags", []):
            return i
    return None


def inject_parameters(nb: Any, params: Optional[Dict[str, Any]]) -> Any:
    """Put a cell tagged `injected-parameters` right after the `parameters`
    cell that assigns `params` ({name: value}, any Python literal), as
    papermill does; the parameters cell itself is left as written.
    ValueError if the notebook has no parameters cell or the cell does not
    define a name."""
    if not params:
        return nb
    import ast
    import nbformat
    i = parameters_cell(nb)
    if i is None:
        raise ValueError(f"no cell tagged {PARAMETERS_TAG!r} to override {sorted(params)}")
    defined = set()
    for node in ast.walk(ast.parse(nb.cells[i].source)):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
    unknown = sorted(set(params) - defined)
    if unknown:
        raise ValueError(f"parameter(s) {unknown} are not set in the parameters cell "
                         f"(it sets: {sorted(defined)})")
    src = "# Injected parameters\n" + "".join(f"{k} = {v!r}\n" for k, v in params.items())
    cell = nbformat.v4.new_code_cell(src)
    cell.metadata["tags"] = [INJECTED_TAG]
    nb.cells.insert(i + 1, cell)
    return nb


def _warnings(nb):
    """Warnings the executed notebook printed (its stderr streams)."""
    out = []
    for ci, cell in enumerate(nb.cells):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream" and o.get("name") == "stderr":
                text = "".join(o.get("text", "")) if isinstance(o.get("text"), list) else o.get("text", "")
                if "warning" in text.lower():
                    out.append(f"cell {ci}: {text.strip().splitlines()[0]}")
    return out


def run_notebook(path: str, out: Optional[str] = None, timeout: float = 600,
                 kernel: str = "python3", params: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Execute one notebook; returns a dict: path, executed (the copy),
    figures (PNG paths), seconds, error (None or 'cell N: Error: message'),
    skipped (None, or the reason a cell gave skip()),
    had_outputs (the source notebook was not stripped), warnings (what
    its cells printed as warnings on stderr).  params: {name: value} to
    inject after the cell tagged `parameters`.  The kernel talks to this
    process over IPC sockets in a private temporary folder (not TCP)."""
    import asyncio
    import tempfile

    import nbformat
    from jupyter_client.manager import AsyncKernelManager
    from jupyter_core.utils import run_sync
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError, DeadKernelError

    folder = os.path.dirname(os.path.abspath(path))
    out = out or os.path.join(folder, BUILD)
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"{out}: not a folder (where the executed notebooks go)")
    try:
        nb = nbformat.read(path, as_version=4)
    except OSError:
        raise                 # (a missing file is FileNotFoundError, as before)
    except Exception as e:
        # (a JSON document that is not a notebook -- '{}', a list -- was a
        # jsonschema ValidationError or an AttributeError traceback, and the
        # notebooks after it did not run)
        lines = str(e).strip().splitlines()
        raise ValueError(f"not a notebook nbformat can read: {type(e).__name__}: "
                         f"{lines[0] if lines else ''}") from None
    os.makedirs(out, exist_ok=True)
    stem = os.path.splitext(os.path.basename(path))[0]
    had_outputs = _has_outputs(nb)
    # the kernel inherits this environment: live arms save under _build/results
    saved = {k: os.environ.get(k) for k in ("HEAPLAB_RESULTS", "MPLBACKEND")}
    os.environ["HEAPLAB_RESULTS"] = os.path.join(out, "results")
    os.environ.pop("MPLBACKEND", None)  # the kernel's inline backend renders the PNGs
    inject_parameters(nb, params)
    sockets = tempfile.mkdtemp(prefix="heaplab-kernel-")
    # an asynchronous manager: with a (blocking) KernelManager given to it,
    # nbclient 0.11 never timed a cell out -- its wait for the reply ran on
    # past --timeout, and a cell of time.sleep(20) under --timeout 2 was
    # "ok" after 21 s (the mutation audit of session 37)
    km = AsyncKernelManager(kernel_name=kernel, transport="ipc",
                            ip=os.path.join(sockets, "kernel"))
    interrupted: List[int] = []

    class Client(NotebookClient):
        """nbclient's own SIGINT handler (set while it runs the notebook)
        kills the kernel and goes on: the Ctrl-C came back as 'the kernel
        died', a FAIL like any other, and the runner went on to the next
        notebook.  This one kills the kernel too and notes the Ctrl-C, which
        run_notebook raises as KeyboardInterrupt once the kernel is down."""
        async def async_start_new_kernel_client(self) -> Any:
            kc = await super().async_start_new_kernel_client()
            loop = asyncio.get_running_loop()

            def on_sigint() -> None:
                interrupted.append(signal.SIGINT)
                asyncio.ensure_future(km.shutdown_kernel(now=True))
            try:
                loop.add_signal_handler(signal.SIGINT, on_sigint)
            except (RuntimeError, NotImplementedError, ValueError):
                pass        # (not the main thread: no handler of nbclient's either)
            return kc
    client = Client(nb, km=km, timeout=timeout, kernel_name=kernel,
                    resources={"metadata": {"path": folder}})
    t0 = time.monotonic()
    error = skipped = None
    try:
        client.execute()
    except CellExecutionError as e:
        where = _error_of(nb)
        first = str(e).strip().splitlines()
        if where and where[1].startswith(NotebookSkipped.__name__ + ": "):
            skipped = where[1].split(": ", 1)[1]
        else:
            error = f"cell {where[0]}: {where[1]}" if where else (first[-1] if first else repr(e))
    except DeadKernelError as e:
        error = f"the kernel died: {e}"
    except TimeoutError as e:
        error = f"a cell ran longer than {timeout} s ({str(e).strip().splitlines()[0]})"
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        # the client does not own a kernel manager it was given: shut the
        # kernel down here (else it lingers and warns when this process exits)
        try:
            if km.has_kernel:
                run_sync(km.shutdown_kernel)(now=False)
        except Exception:
            pass
        shutil.rmtree(sockets, ignore_errors=True)
    seconds = time.monotonic() - t0
    executed = os.path.join(out, f"{stem}.ipynb")
    nbformat.write(nb, executed)
    if interrupted:
        raise KeyboardInterrupt
    for old in glob.glob(os.path.join(out, stem, "*.png")):
        os.remove(old)
    figures = _figures(nb, stem, out)
    return {"path": path, "executed": executed, "figures": figures, "seconds": seconds,
            "error": error, "skipped": skipped, "had_outputs": had_outputs,
            "warnings": _warnings(nb)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    """The command line (python -m heaplab.notebooks); returns the exit status."""
    ap = argparse.ArgumentParser(prog="python -m heaplab.notebooks",
                                 description="Execute notebooks headless; write the executed "
                                             "copies and their PNG figures under _build/.")
    ap.add_argument("paths", nargs="*", default=["docs/notebooks"],
                    help="notebooks or folders of notebooks (default: docs/notebooks)")
    ap.add_argument("--out", help="where executed copies go (default: <folder>/_build)")
    ap.add_argument("--check", action="store_true",
                    help="also fail on a notebook that shows no figure or was committed "
                         "with outputs")
    ap.add_argument("--timeout", type=float, default=600,
                    help="seconds one cell may run before the notebook fails (default 600)")
    ap.add_argument("-p", "--param", action="append", default=[], metavar="NAME=VALUE",
                    help="override a name of the notebooks' cell tagged `parameters` "
                         "(VALUE is a Python literal, else a string); repeatable")
    ap.add_argument("--strip", action="store_true",
                    help="clear the notebooks' outputs in place and exit (nothing is run)")
    args = ap.parse_args(argv)
    if args.timeout <= 0:
        ap.error(f"--timeout {args.timeout}: must be > 0 seconds")
    params = {}
    for item in args.param:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier():
            ap.error(f"--param {item!r}: expected NAME=VALUE")
        try:
            import ast
            params[name] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            params[name] = value
    try:
        notebooks = find_notebooks(args.paths)
    except FileNotFoundError as e:
        print(f"heaplab.notebooks: {e}", file=sys.stderr)
        return 2
    if not notebooks:
        print(f"heaplab.notebooks: no notebooks in {' '.join(args.paths)}", file=sys.stderr)
        return 2
    if args.strip:
        for p in notebooks:
            print(f"{'stripped' if strip(p) else 'clean   '} {p}")
        return 0
    try:
        import nbclient  # noqa: F401
        import nbformat  # noqa: F401
    except ImportError as e:
        print(f"heaplab.notebooks: {e}; install with: pip install 'heaplab[notebooks]'",
              file=sys.stderr)
        return 2
    if args.out and os.path.exists(args.out) and not os.path.isdir(args.out):
        print(f"heaplab.notebooks: --out {args.out}: not a folder", file=sys.stderr)
        return 2
    failures = []
    skips = []
    total = time.monotonic()
    for n, p in enumerate(notebooks):
        try:
            r = run_notebook(p, out=args.out, timeout=args.timeout, params=params)
        except ValueError as e:
            print(f"FAIL {p}  {e}", flush=True)
            failures.append(p)
            continue
        except KeyboardInterrupt:
            # Ctrl-C stops the run (it was this notebook's FAIL "the kernel
            # died", and the next notebooks ran: a Ctrl-C per notebook)
            left = len(notebooks) - n - 1
            print(f"stop {p}  interrupted (Ctrl-C): its executed copy, if any, is incomplete"
                  + (f"; {left} notebook(s) after it not run" if left else ""), flush=True)
            return 130
        problems = []
        if r["error"]:
            problems.append(r["error"])
        if args.check and r["warnings"]:
            problems.append("it printed warnings: " + "; ".join(r["warnings"]))
        if args.check and not r["figures"] and not r["skipped"]:
            problems.append("it displayed no figure")
        if args.check and r["had_outputs"]:
            problems.append("the committed notebook carries outputs "
                            f"(python -m heaplab.notebooks --strip {p})")
        status = "FAIL" if problems else "skip" if r["skipped"] else "ok"
        print(f"{status:4} {p}  {r['seconds']:.1f} s, {len(r['figures'])} figure(s) "
              f"-> {r['executed']}", flush=True)
        if r["skipped"]:
            print(f"       skipped: {r['skipped']}")
            if not problems:
                skips.append(p)
        for f in r["figures"]:
            print(f"       {f}")
        for msg in problems:
            print(f"       {msg}")
        if problems:
            failures.append(p)
    skipped = f", {len(skips)} skipped" if skips else ""
    print(f"{len(notebooks) - len(failures) - len(skips)} of {len(notebooks)} notebooks ran"
          f"{skipped} ({time.monotonic() - total:.1f} s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
