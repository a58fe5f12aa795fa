#!/usr/bin/env python3
"""make mutants -- the mutation audit (issue 22).

Each mutation of tools/mutants.toml puts one defect the seeds found (DESIGN.md
section 7, issue 22's list) back into a scratch copy of this tree, builds it,
and runs the tests named for it.  A mutant is killed when at least one of them
fails (or times out); the run prints a table -- mutation, killed by, time --
and fails if any mutant survives, if a mutation no longer applies (the text it
replaces is gone or ambiguous: the code moved, so move the mutation with it),
or if a mutant does not build.

    python tools/mutants.py                  # every mutation (what make mutants runs)
    python tools/mutants.py -k quiet -k 32   # only mutations whose name contains a word
    python tools/mutants.py --check          # each mutation applies, each test exists (fast)
    python tools/mutants.py --list           # the list: name, defect, tests

The working tree is never touched: the scratch copy (tracked and untracked,
not ignored, files) goes under $TMPDIR and is deleted afterwards (--keep to
keep it).  Before any mutation, every named test runs once on the unmutated
copy (the baseline): a test that already fails there would "kill" anything.

Tests are named by kind:
    c:NAME         a C scenario test (tests/c/NAME.c), run with meson test
    lua:NAME       a busted spec of the Lua module (tests/lua/NAME_spec.lua), run
                   with meson test in the same build (lua-busted needed)
    preload:NAME   a test of suite preload (tests/preload/meson.build): the
                   preloaded malloc, libheaplab-malloc.so, built with the test
                   programs and run with meson test
    clients:NAME   a test of suite clients (tests/clients/meson.build): the
                   launchers heaplab-lua and heaplab-python built with what
                   the suite hands them (the Lua module, libheaplab-malloc.so)
                   and run with meson test
    py:PATH[::T]   a pytest file or test of tests/python
    exp:PATH[::T]  an experiment (pytest), results under the scratch copy
The Python package under test is the scratch copy's: its CFFI extension built
there (-Dpython=true) and put first on PYTHONPATH.
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import tomllib
except ModuleNotFoundError:  # Python < 3.11
    tomllib = None

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIST = os.path.join(ROOT, "tools", "mutants.toml")
KINDS = ("c", "lua", "preload", "clients", "py", "exp")
BUILD_KINDS = ("c", "lua", "preload", "clients")  # run by meson test in build/, not by pytest
DEFAULT_TIMEOUT = 600


class ListError(Exception):
    """The mutation list is wrong: it names something that is not there."""


# ---- the list ---------------------------------------------------------------------------

def load(path=LIST):
    if tomllib is None:
        raise ListError("tools/mutants.py needs Python 3.11 or later (tomllib)")
    with open(path, "rb") as f:
        data = tomllib.load(f)
    muts = data.get("mutant", [])
    names = set()
    for m in muts:
        for key in ("name", "defect", "edit", "tests"):
            if key not in m:
                raise ListError(f"mutation {m.get('name', '?')}: no '{key}'")
        if m["name"] in names:
            raise ListError(f"mutation {m['name']} is listed twice")
        names.add(m["name"])
        for e in m["edit"]:
            if set(e) != {"file", "old", "new"} or e["old"] == e["new"]:
                raise ListError(f"mutation {m['name']}: an edit is file, old, new (old != new)")
        for t in m["tests"]:
            kind = t.split(":", 1)[0]
            if ":" not in t or kind not in KINDS:
                raise ListError(f"mutation {m['name']}: test {t!r} is not c:, lua:, preload:, clients:, py: or exp:")
    return muts


def check_applies(m, tree):
    """The messages of every edit of m that does not apply to tree (empty: all do)."""
    errors = []
    for e in m["edit"]:
        path = os.path.join(tree, e["file"])
        if not os.path.exists(path):
            errors.append(f"{e['file']} does not exist")
            continue
        with open(path, encoding="utf-8") as f:
            n = f.read().count(e["old"])
        if n != 1:
            first = e["old"].strip().splitlines()[0][:70]
            errors.append(f"{e['file']}: the text to replace occurs {n} times, not once "
                          f"({first!r}): the code moved -- move the mutation with it")
    return errors


def c_test_names(tree):
    with open(os.path.join(tree, "tests", "meson.build"), encoding="utf-8") as f:
        text = f.read()
    return set(re.findall(r"^\s*'([a-z0-9_]+)',?\s*(?:#.*)?$", text, re.M))


def lua_spec_names(tree):
    with open(os.path.join(tree, "bindings", "lua", "meson.build"), encoding="utf-8") as f:
        text = f.read()
    return set(re.findall(r"^\s*'([a-z0-9_]+)',?\s*(?:#.*)?$", text, re.M))


def preload_test_names(tree):
    """The names of suite preload's tests: literal ones, the scenarios of
    run.py ('preload_' + key) and the prefixes of names made in a loop."""
    with open(os.path.join(tree, "tests", "preload", "meson.build"), encoding="utf-8") as f:
        text = f.read()
    names = set(re.findall(r"test\(\s*'([a-z0-9_]+)'\s*,", text))
    scenarios = re.search(r"preload_scenarios = \{(.*?)\}", text, re.S)
    if scenarios:
        names |= {"preload_" + k for k in re.findall(r"'([a-z0-9_]+)'\s*:", scenarios.group(1))}
    prefixes = set(re.findall(r"test\(\s*'([a-z0-9_]+)'\s*\+", text))
    return names, prefixes


def clients_test_names(tree):
    """The names of suite clients' tests: the keys of the scenario dicts of
    tests/clients/meson.build ('name' : timeout)."""
    with open(os.path.join(tree, "tests", "clients", "meson.build"), encoding="utf-8") as f:
        return set(re.findall(r"^\s*'([a-z0-9_]+)'\s*:\s*\d+\s*,?\s*$", f.read(), re.M))


def needs_lua_module(t):
    """A busted spec, or an experiment of the Lua twins (experiments/lua/,
    run by test_lua_experiments.py with lua5.4 and build/'s Lua module)."""
    return t.startswith(("lua:", "clients:")) or (t.startswith("exp:") and "lua" in t)


def on_meson(t):
    """True for a test meson test runs in build/ (c:, lua:, preload:, clients:)."""
    return t.split(":", 1)[0] in BUILD_KINDS


def check_tests_exist(m, tree):
    errors = []
    c_names = c_test_names(tree)
    for t in m["tests"]:
        kind, name = t.split(":", 1)
        if kind == "lua":
            if (name not in lua_spec_names(tree)
                    or not os.path.exists(os.path.join(tree, "tests", "lua", name + "_spec.lua"))):
                errors.append(f"Lua spec {name} is not in bindings/lua/meson.build")
            continue
        if kind == "c":
            if name not in c_names or not os.path.exists(os.path.join(tree, "tests", "c", name + ".c")):
                errors.append(f"C test {name} is not in tests/meson.build")
            continue
        if kind == "preload":
            names, prefixes = preload_test_names(tree)
            if name not in names and not any(name.startswith(p) for p in prefixes):
                errors.append(f"preload test {name} is not in tests/preload/meson.build")
            continue
        if kind == "clients":
            if name not in clients_test_names(tree):
                errors.append(f"clients test {name} is not in tests/clients/meson.build")
            continue
        path, _, func = name.partition("::")
        full = os.path.join(tree, path)
        if not os.path.exists(full):
            errors.append(f"{path} does not exist")
        elif func and not re.search(rf"^def {re.escape(func.split('[')[0])}\(",
                                    open(full, encoding="utf-8").read(), re.M):
            errors.append(f"{path} has no test {func}")
    return errors


# ---- running ----------------------------------------------------------------------------

def tool(name):
    """meson/ninja: next to this Python first (a venv), then on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), name)
    found = here if os.access(here, os.X_OK) else shutil.which(name)
    if not found:
        raise SystemExit(f"mutants: {name} not found (tools/setup.sh installs it)")
    return found


def descendants(pid):
    """The processes below pid, from /proc (children first found, then theirs)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def kill_tree(pid):
    """SIGKILL pid's process group and every process below it: meson test
    starts each test in a session of its own, which killing meson's group
    does not reach (a mutant's endless test ran on after its timeout)."""
    below = descendants(pid)
    for target in [pid] + below:
        try:
            os.killpg(os.getpgid(target), signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.kill(target, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def run(cmd, cwd, env=None, timeout=DEFAULT_TIMEOUT, log=None):
    """(returncode or 'timeout', seconds); output to log."""
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=cwd, env=env, stdout=log or subprocess.DEVNULL,
                         stderr=subprocess.STDOUT, start_new_session=True)
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(p.pid)
        p.wait()
        rc = "timeout"
    return rc, time.monotonic() - t0


def copy_tree(dest):
    """The tree as it is now: tracked files and untracked ones git does not
    ignore (a file not committed yet is audited too)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "-co", "--exclude-standard"], cwd=ROOT,
                             check=True, capture_output=True).stdout
        files = [f for f in out.decode().split("\0") if f]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for base, dirs, names in os.walk(ROOT):
            rel = os.path.relpath(base, ROOT)
            dirs[:] = [d for d in dirs if not (rel == "." and (d.startswith("build") or d in (
                "results", ".git")))]
            files += [os.path.normpath(os.path.join(rel, n)) for n in names]
    for f in files:
        src = os.path.join(ROOT, f)
        if not os.path.isfile(src):
            continue  # deleted in the working tree
        os.makedirs(os.path.dirname(os.path.join(dest, f)) or dest, exist_ok=True)
        shutil.copy2(src, os.path.join(dest, f))


class Scratch:
    def __init__(self, path, log):
        self.path = path
        self.log = log
        self.meson, self.ninja = tool("meson"), tool("ninja")
        self.c_built = set()
        self.py_ready = False
        self.env = dict(os.environ)
        self.env.update(PYTHONPATH=os.path.join(path, "pkg"), HEAPLAB_BUILD=os.path.join(path, "build"),
                        HEAPLAB_RESULTS=os.path.join(path, "results"), MALLOC_PERTURB_="0",
                        PYTHONDONTWRITEBYTECODE="1")

    def setup(self, need_c, need_py):
        if need_c:
            self._do([self.meson, "setup", "build", "--buildtype=release"], "meson setup build")
        if need_py:
            self._do([self.meson, "setup", "build-py", "--buildtype=release", "-Dpython=true",
                      "-Dtests=false", "-Dlua=disabled"], "meson setup build-py")

    def _do(self, cmd, what):
        rc, _ = run(cmd, self.path, self.env, log=self.log)
        if rc != 0:
            raise SystemExit(f"mutants: {what} failed in {self.path} (log: {self.log.name})")

    def build(self, tests):
        """Build what tests need; False when the build fails."""
        c = sorted({t[2:] for t in tests if t.startswith("c:")})
        if c:
            rc, _ = run([self.ninja, "-C", "build"] + [f"tests/test_{n}" for n in c], self.path,
                        self.env, log=self.log)
            if rc != 0:
                return False
        if any(t.startswith("preload:") for t in tests):
            # the library and every test program of suite preload (the
            # scenarios run programs of their own beside them), and the
            # plugins the programs dlopen (libpreload_deepbind_*.so)
            out = subprocess.run([self.ninja, "-C", "build", "-t", "targets", "all"], cwd=self.path,
                                 env=self.env, capture_output=True, text=True).stdout
            targets = re.findall(r"^(tests/preload/(?:test_[a-z0-9_]+|lib[a-z0-9_]+\.so)): ", out, re.M)
            rc, _ = run([self.ninja, "-C", "build", "clients/preload/libheaplab-malloc.so"]
                        + targets, self.path, self.env, log=self.log)
            if rc != 0:
                return False
        if any(t.startswith("clients:") for t in tests):
            # the launchers, and what the suite hands them (the Lua module
            # comes below): the preloaded library (launcher_children,
            # preloaded_launcher), and the suite's own modules
            # (lua_exit_in_signal_handler's exit_in_handler.so: its baseline
            # failed in the scratch copy without it; exit_inside_errlock's
            # slow_unlock.so)
            out = subprocess.run([self.ninja, "-C", "build", "-t", "targets", "all"], cwd=self.path,
                                 env=self.env, capture_output=True, text=True).stdout
            own = re.findall(r"^(tests/clients/[a-z0-9_]+\.so): ", out, re.M)
            rc, _ = run([self.ninja, "-C", "build", "clients/heaplab-lua", "clients/heaplab-python",
                         "clients/preload/libheaplab-malloc.so"] + own, self.path, self.env,
                        log=self.log)
            if rc != 0:
                return False
        if any(needs_lua_module(t) for t in tests):
            rc, _ = run([self.ninja, "-C", "build", "bindings/lua/heaplab.so"], self.path,
                        self.env, log=self.log)
            if rc != 0:
                return False
        if any(not on_meson(t) for t in tests):
            rc, _ = run([self.ninja, "-C", "build-py"], self.path, self.env, log=self.log)
            if rc != 0:
                return False
            pkg = os.path.join(self.path, "pkg", "heaplab")
            shutil.rmtree(os.path.dirname(pkg), ignore_errors=True)
            os.makedirs(pkg)
            src = os.path.join(self.path, "bindings", "python", "heaplab")
            for f in os.listdir(src):
                if f.endswith(".py"):
                    shutil.copy2(os.path.join(src, f), pkg)
            ext = os.path.join(self.path, "build-py", "bindings", "python")
            for f in os.listdir(ext):
                # the extension and the modules generated at build time (_options.py)
                if (f.startswith("_heaplab") and f.endswith(".so")) or f.endswith(".py"):
                    shutil.copy2(os.path.join(ext, f), pkg)
            # the preloaded library, where heaplab.preload_path() finds it (a
            # command arm on glibc or heaplab preloads it)
            lib = os.path.join(self.path, "build-py", "clients", "preload",
                               "libheaplab-malloc.so")
            if os.path.exists(lib):
                shutil.copy2(lib, pkg)
            self.dist_info(os.path.dirname(pkg))
            # the benchmark programs bench.py runs (tests of experiments/bench:
            # HEAPLAB_BUILD is build/, where only the C tests were built)
            out = subprocess.run([self.ninja, "-C", "build", "-t", "targets", "all"], cwd=self.path,
                                 env=self.env, capture_output=True, text=True).stdout
            bench = re.findall(r"^(experiments/bench/bench-[A-Za-z0-9_.-]+): ", out, re.M)
            if bench:
                rc, _ = run([self.ninja, "-C", "build"] + bench, self.path, self.env, log=self.log)
                if rc != 0:
                    return False
        return True

    def dist_info(self, where):
        """The package's metadata beside it on PYTHONPATH: its entry points --
        the pytest plugin (pytest11: the `lab` fixture, the tables), the
        `heaplab` script -- are found through an installed distribution, and
        a fresh clone's venv has none (the pytest plugin's tests then saw
        "fixture 'lab' not found"; `make mutants`' baseline failed there)."""
        with open(os.path.join(self.path, "pyproject.toml"), "rb") as f:
            project = tomllib.load(f)["project"]
        with open(os.path.join(self.path, "meson.build"), encoding="utf-8") as f:
            # (the version is meson.build's: dynamic in pyproject.toml)
            m = re.search(r"version\s*:\s*'([^']+)'", f.read())
        project["version"] = m.group(1) if m else "0"
        info = os.path.join(where, f"{project['name']}-{project['version']}.dist-info")
        os.makedirs(info, exist_ok=True)
        with open(os.path.join(info, "METADATA"), "w", encoding="utf-8") as f:
            f.write(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                    f"Version: {project['version']}\n")
        groups = dict(project.get("entry-points", {}))
        if project.get("scripts"):
            groups["console_scripts"] = project["scripts"]
        with open(os.path.join(info, "entry_points.txt"), "w", encoding="utf-8") as f:
            for group, eps in groups.items():
                f.write(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in eps.items()) + "\n")

    def test(self, t, timeout):
        """True when test t passes."""
        kind, name = t.split(":", 1)
        self.log.write(f"\n==== {t}\n".encode())
        self.log.flush()
        if kind in BUILD_KINDS:
            cmd = [self.meson, "test", "-C", "build", "--no-rebuild", "--print-errorlogs", name]
        else:
            cmd = [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", name]
        rc, _ = run(cmd, self.path, self.env, timeout=timeout, log=self.log)
        return rc == 0, rc

    def apply(self, m):
        saved = {}
        for e in m["edit"]:
            path = os.path.join(self.path, e["file"])
            with open(path, encoding="utf-8") as f:
                text = f.read()
            saved.setdefault(path, text)
            with open(path, "w", encoding="utf-8") as f:
                f.write(text.replace(e["old"], e["new"], 1))
        return saved

    @staticmethod
    def restore(saved):
        for path, text in saved.items():
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)


def table(rows):
    head = ("mutation", "killed by", "time")
    w0 = max([len(head[0])] + [len(r[0]) for r in rows])
    w1 = max([len(head[1])] + [len(r[1]) for r in rows])
    lines = [f"{head[0]:<{w0}}  {head[1]:<{w1}}  {head[2]:>6}", f"{'-' * w0}  {'-' * w1}  {'-' * 6}"]
    for name, killed, secs in rows:
        lines.append(f"{name:<{w0}}  {killed:<{w1}}  {secs:5.0f}s")
    return "\n".join(lines)


def short(t):
    kind, name = t.split(":", 1)
    if kind == "c":
        return name
    if kind in ("lua", "preload", "clients"):
        return f"{name} ({kind})"
    path, _, func = name.partition("::")
    return os.path.basename(path)[:-3] + (f"::{func}" if func else "")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true",
                    help="only check that every mutation applies and every test it names exists")
    ap.add_argument("--list", action="store_true", help="print the list and exit")
    ap.add_argument("-k", action="append", default=[], metavar="WORD",
                    help="only the mutations whose name contains WORD (repeatable)")
    ap.add_argument("--keep", action="store_true", help="keep the scratch copy")
    ap.add_argument("--no-baseline", action="store_true",
                    help="skip running the tests on the unmutated copy first")
    ap.add_argument("--all-tests", action="store_true",
                    help="run every named test of a mutant, not only until one kills it")
    args = ap.parse_args(argv)

    try:
        muts = load()
    except (ListError, OSError, ValueError) as e:
        print(f"mutants: {LIST}: {e}", file=sys.stderr)
        return 2
    if args.k:
        muts = [m for m in muts if any(w in m["name"] for w in args.k)]
        if not muts:
            print(f"mutants: no mutation matches {args.k}", file=sys.stderr)
            return 2
    if args.list:
        for m in muts:
            print(f"{m['name']}\n    {m['defect']}\n    tests: {', '.join(m['tests'])}")
        return 0

    problems = [f"{m['name']}: {p}" for m in muts
                for p in check_applies(m, ROOT) + check_tests_exist(m, ROOT)]
    if problems:
        print("mutants: the list does not match the tree:\n  " + "\n  ".join(problems),
              file=sys.stderr)
        return 1
    if args.check:
        print(f"mutants: all {len(muts)} mutations apply; every test they name exists")
        return 0

    t_start = time.monotonic()
    scratch = tempfile.mkdtemp(prefix="heaplab-mutants-")
    log = open(os.path.join(scratch, "mutants.log"), "wb")
    print(f"mutants: {len(muts)} mutations; scratch copy {scratch} (log: mutants.log)", flush=True)
    rows, failed = [], []
    try:
        copy_tree(scratch)
        s = Scratch(scratch, log)
        everything = sorted({t for m in muts for t in m["tests"]})
        # (build/ also for the Python tests: the benchmark programs)
        s.setup(any(on_meson(t) or needs_lua_module(t) or not on_meson(t) for t in everything),
                any(not on_meson(t) for t in everything))
        if not s.build(everything):
            print(f"mutants: the unmutated tree does not build (log: {log.name})", file=sys.stderr)
            return 1
        if not args.no_baseline:
            t0 = time.monotonic()
            bad = [t for t in everything if not s.test(t, DEFAULT_TIMEOUT)[0]]
            print(f"baseline: {len(everything)} tests pass on the unmutated copy "
                  f"({time.monotonic() - t0:.0f}s)" if not bad else
                  f"baseline: FAILS without any mutation: {', '.join(bad)}", flush=True)
            if bad:
                failed.append("(baseline)")  # keeps the scratch copy and its log
                print(f"mutants: fix those first (log: {log.name})", file=sys.stderr)
                return 1
        for m in muts:
            t0 = time.monotonic()
            log.write(f"\n\n######## {m['name']}\n".encode())
            errors = check_applies(m, scratch)
            if errors:
                rows.append((m["name"], "DOES NOT APPLY: " + "; ".join(errors), 0))
                failed.append(m["name"])
                continue
            saved = s.apply(m)
            try:
                if not s.build(m["tests"]):
                    verdict = "BUILD FAILED (the mutation is broken)"
                    failed.append(m["name"])
                else:
                    killers, passed = [], []
                    for t in m["tests"]:
                        ok, rc = s.test(t, m.get("timeout", DEFAULT_TIMEOUT))
                        if ok:
                            passed.append(short(t))
                            continue
                        killers.append(short(t) + (" (timeout)" if rc == "timeout" else ""))
                        if not args.all_tests:
                            break
                    verdict = ", ".join(killers) if killers else "SURVIVED"
                    if killers and passed:
                        log.write(f"\n{m['name']}: passed with the mutant: {passed}\n".encode())
                        print(f"  ({m['name']}: passed with the mutant: {', '.join(passed)})")
                    if not killers:
                        failed.append(m["name"])
            finally:
                s.restore(saved)
            rows.append((m["name"], verdict, time.monotonic() - t0))
            print(f"  {m['name']}: {verdict} ({rows[-1][2]:.0f}s)", flush=True)
    finally:
        log.close()
        if not args.keep and not failed:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    print(table(rows))
    total = time.monotonic() - t_start
    print(f"\n{len(rows) - len(failed)} of {len(rows)} mutants killed in {total / 60:.1f} min"
          + (f"; NOT killed: {', '.join(failed)} (scratch copy and log kept in {scratch})"
             if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
