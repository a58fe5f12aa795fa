import glob
import importlib.util
import os
import signal
import sys

import pytest

# The Ctrl-C tests send SIGINT to a child and expect CPython's
# KeyboardInterrupt there.  A shell without job control starts a background
# job with SIGINT ignored (`make test &` or `nohup make test &` in a script),
# every child inherits that, and those tests failed for a reason of the
# shell's.  A handler here is reset to the default action in every child at
# exec.  Before heaplab's import: heaplab hooks its interruptible calls to
# SIGINT only when CPython's own handler is in place, as in a terminal.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

import heaplab  # noqa: E402


@pytest.fixture
def heap():
    h = heaplab.Heap()
    yield h
    h.close()


@pytest.fixture
def experiment_source(tmp_path, monkeypatch):
    """Write `source` (a module defining Experiments) to a file and import it
    as module `name` (the harness looks an arm's module up in sys.modules,
    where it stays until the test ends); records go under tmp_path/results.
    Returns the module."""
    monkeypatch.setenv("HEAPLAB_RESULTS", str(tmp_path / "results"))
    loaded = []

    def load(name, source):
        path = tmp_path / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        loaded.append(name)
        spec.loader.exec_module(mod)
        return mod
    yield load
    for name in loaded:
        sys.modules.pop(name, None)


@pytest.fixture
def run_experiment_source(experiment_source):
    """experiment_source, then its Experiment `T` run with its records saved;
    returns the results by arm."""
    return lambda name, source: experiment_source(name, source).T.run(save=True)


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def repo_experiments():
    """The Experiments the modules experiments/<pattern> define (imported
    under a private name each, experiments/ on sys.path while they load)."""
    from heaplab.harness import Experiment

    def load(pattern="test_e*.py"):
        out = []
        sys.path.insert(0, os.path.join(ROOT, "experiments"))
        try:
            for path in sorted(glob.glob(os.path.join(ROOT, "experiments", pattern))):
                name = "_repo_" + os.path.basename(path)[:-3]
                spec = importlib.util.spec_from_file_location(name, path)
                mod = importlib.util.module_from_spec(spec)
                sys.modules[name] = mod  # (the harness looks its arms' module up)
                spec.loader.exec_module(mod)
                out += [v for v in vars(mod).values() if isinstance(v, Experiment)]
        finally:
            sys.path.remove(os.path.join(ROOT, "experiments"))
        return out
    return load
