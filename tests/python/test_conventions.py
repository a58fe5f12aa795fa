"""The conventions a Python user expects of the installed package (issue 21):
typed API checked by mypy --strict, every option in help(heaplab.Heap) from the
generated table, docstrings and __all__, the command line, the pytest plugin
from outside this repository, the experiments shipped inside the package.

Everything runs against the installed heaplab from a temporary directory (not
the source tree), as a user outside a checkout would."""
import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap

import pytest

import heaplab
import heaplab.harness
import heaplab.notebooks
import heaplab.pytest_plugin
from heaplab import _options

# no assertion here depends on the machine's load (no bounded wait, no sampled
# footprint): make test runs these beside the notebooks, the fuzzers and the
# soak (pyproject.toml's markers)
pytestmark = pytest.mark.shares_the_machine

HERE = os.path.dirname(os.path.abspath(__file__))
TYPING = os.path.join(HERE, "typing")


def run(args, cwd, env=None, timeout=300, shell=False):
    e = dict(os.environ)
    e.pop("HEAPLAB_EXPERIMENTS", None)
    e.update(env or {})
    return subprocess.run(args, cwd=cwd, env=e, capture_output=True, text=True, timeout=timeout,
                          shell=shell)


# ---- typing -------------------------------------------------------------------------

def test_mypy_strict_passes_on_a_typed_client(tmp_path):
    script = os.path.join(TYPING, "typed_client.py")
    p = run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", script],
            cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    # and it runs
    p = run([sys.executable, script], cwd=tmp_path)
    assert p.returncode == 0 and "objects" in p.stdout, p.stdout + p.stderr


def test_mypy_strict_rejects_wrong_options_and_types(tmp_path):
    """The typed API can fail a wrong program: each marked line is an error."""
    script = os.path.join(TYPING, "bad_client.py")
    p = run([sys.executable, "-m", "mypy", "--strict", "--no-incremental", script], cwd=tmp_path)
    out = p.stdout
    assert p.returncode == 1, out + p.stderr
    for needle in ('Unexpected keyword argument "no_such_option"', '"page_release"',
                   '"collector"', '"alloc"', "Incompatible types in assignment"):
        assert needle in out, f"mypy did not report {needle}:\n{out}"
    assert "Found 5 errors" in out, out


def test_package_is_typed():
    folder = os.path.dirname(heaplab.__file__)
    assert os.path.isfile(os.path.join(folder, "py.typed"))
    assert os.path.isfile(os.path.join(folder, "_options.py")), "the generated option module"


def test_generated_option_table_matches_the_library():
    """_options.py is generated at build time from heaplab.h; the library's
    own table (hl_option_info_get, read at run time) must agree with it."""
    runtime = heaplab.options()
    generated = {row[0]: row for row in _options.OPTION_TABLE}
    assert list(generated) == list(runtime)
    for name, (_, kind, default, lo, hi, choices, desc) in generated.items():
        o = runtime[name]
        assert (kind, default, lo, hi) == (o["kind"], o["default"], o["min"], o["max"]), name
        assert list(choices) == (o["choices"] or []), name
        assert " ".join(o["description"].split()) == desc, name
    assert set(_options.HeapOptions.__annotations__) == set(runtime)
    assert _options.Footprint._fields == heaplab.Footprint._fields
    assert _options.ChurnResult._fields == heaplab.ChurnResult._fields


def test_help_lists_every_option():
    sig = inspect.signature(heaplab.Heap)
    names = [p for p in sig.parameters]
    assert names == list(heaplab.options()), "Heap's signature is the option table, in order"
    for name, o in heaplab.options().items():
        p = sig.parameters[name]
        assert p.kind is inspect.Parameter.KEYWORD_ONLY and p.default == o["default"], name
    import pydoc
    text = pydoc.render_doc(heaplab.Heap, renderer=pydoc.plaintext)
    for name, o in heaplab.options().items():
        assert f"{name}:" in text, f"help(heaplab.Heap) does not show {name}"
    assert "collected|manual" in text and "BiBOP page size" in text


# ---- names and docstrings -------------------------------------------------------------

def test_all_lists_every_public_exception_and_name():
    errors = [n for n, v in vars(heaplab).items()
              if isinstance(v, type) and issubclass(v, heaplab.Error)]
    assert set(errors) <= set(heaplab.__all__), set(errors) - set(heaplab.__all__)
    for n in ("UnknownOption", "CheckFailed", "HeapOptions"):
        assert n in heaplab.__all__
    for n in heaplab.__all__:
        assert hasattr(heaplab, n), n


PUBLIC_MODULES = ["heaplab", "heaplab.harness", "heaplab.analysis", "heaplab.notebooks",
                  "heaplab.pytest_plugin", "heaplab.__main__", "heaplab.sweep"]


def _public(mod):
    names = getattr(mod, "__all__", None) or [n for n in vars(mod) if not n.startswith("_")]
    for n in names:
        v = getattr(mod, n)
        if (inspect.isfunction(v) or inspect.isclass(v)) and getattr(v, "__module__", "") in (
                mod.__name__, "heaplab._options"):
            yield n, v


@pytest.mark.parametrize("modname", PUBLIC_MODULES)
def test_every_public_definition_has_a_docstring(modname):
    mod = importlib.import_module(modname)
    assert mod.__doc__, modname
    missing = []
    for n, v in _public(mod):
        if not inspect.getdoc(v):
            missing.append(n)
        if inspect.isclass(v):
            for m, f in vars(v).items():
                if m.startswith("_") or not (inspect.isfunction(f) or isinstance(f, property)):
                    continue
                if not (f.__doc__ or "").strip():
                    missing.append(f"{n}.{m}")
    assert not missing, f"{modname}: no docstring on {missing}"


# ---- HEAPLAB_ variables -------------------------------------------------------------------

# HEAPLAB_ names in the tree that are no environment variable: header guards
# (*_H), the option table's markers, a compile-time macro, a placeholder, the
# unknown names the preload tests set to see the warning (tests/preload/run.py),
# the typos hl_env_var_kind's and the sweep's tests are refused
NOT_VARIABLES = {"HEAPLAB_OPTIONS_BEGIN", "HEAPLAB_OPTIONS_END", "HEAPLAB_LUA_READLINE",
                 "HEAPLAB_NAME", "HEAPLAB_NO_SUCH", "HEAPLAB_NO_SUCH_OPTION",
                 "HEAPLAB_WARM_PAGE", "HEAPLAB_WARM_PAGESS", "HEAPLAB_STATSX", "HEAPLAB_PAGESIZE",
                 "HEAPLAB_PAGE_SIZ"}


def test_every_heaplab_variable_in_the_tree_is_an_option_or_read_quietly(tmp_path):
    """A HEAPLAB_ variable that is no option warns 'is not an option' in every
    heap that reads the environment (the preloaded library, the launchers, a
    Heap()) -- unless one of heaplab's tools reads it (options.c's tool_vars).
    HEAPLAB_REPEAT, HEAPLAB_FETCH_LUA_TESTES, HEAPLAB_MODEL_EXAMPLES... were
    documented or set by the Makefile and warned about in every program.
    (The tree is read, not git's index: the mutation audit runs this in a
    copy without .git.)"""
    import re
    root = os.path.dirname(os.path.dirname(HERE))
    word = re.compile(r"\bHEAPLAB_[A-Z0-9_]*[A-Z0-9]\b")
    found = set()
    for top, dirs, files in os.walk(root):
        # the sources and docs: not the builds, the venv, results, caches
        dirs[:] = [d for d in dirs if not d.startswith((".", "build", "results", "__pycache__"))]
        for name in files:
            if name.endswith((".c", ".h", ".py", ".md", ".build", ".lua", ".sh", ".toml",
                              ".ipynb", ".txt", ".map")) or name == "Makefile":
                with open(os.path.join(top, name), encoding="utf-8", errors="replace") as f:
                    found.update(word.findall(f.read()))
    options = {"HEAPLAB_" + name.upper() for name in heaplab.options()}
    names = {n for n in found if not n.endswith("_H")} - NOT_VARIABLES - options
    # (the fault sites are options too, their values checked: a variable of
    # each is set by the tests that mean it)
    names = {n for n in names if not n.startswith("HEAPLAB_FAULT_")}
    assert "HEAPLAB_REPEAT" in names and "HEAPLAB_STATS" in names, sorted(names)
    env = {n: "1" for n in names}
    env["HEAPLAB_NO_SUCH_TOOL_VARIABLE"] = "1"   # the control: warned about
    r = run([sys.executable, "-c", "import heaplab; heaplab.Heap().close()"], cwd=tmp_path,
            env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    warned = {line.split()[2] for line in r.stderr.splitlines() if "is not an option" in line}
    assert warned == {"HEAPLAB_NO_SUCH_TOOL_VARIABLE"}, (
        f"warned about as no option (options.c's tool_vars lists the tools' variables): "
        f"{sorted(warned - {'HEAPLAB_NO_SUCH_TOOL_VARIABLE'})}\n{r.stderr}")


# ---- the command line -------------------------------------------------------------------

def test_cli_help_version_and_errors(tmp_path):
    p = run([sys.executable, "-m", "heaplab", "--help"], cwd=tmp_path)
    assert p.returncode == 0 and "options" in p.stdout and "report" in p.stdout, p.stderr
    p = run([sys.executable, "-m", "heaplab", "--version"], cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == f"heaplab {heaplab.__version__}"
    p = run([sys.executable, "-m", "heaplab", "frobnicate"], cwd=tmp_path)
    assert p.returncode == 2 and "frobnicate" in p.stderr
    for known in ("options", "stats", "version", "report", "run", "compare"):
        assert known in p.stderr, p.stderr
    assert "Traceback" not in p.stderr
    p = run([sys.executable, "-m", "heaplab"], cwd=tmp_path)
    assert p.returncode == 2 and "COMMAND" in p.stderr


def test_console_script_is_installed(tmp_path):
    exe = os.path.join(os.path.dirname(sys.executable), "heaplab")
    assert os.path.exists(exe), "the heaplab console script"
    p = run([exe, "version"], cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == heaplab.__version__


def test_cli_closed_pipe_prints_no_traceback(tmp_path):
    cmd = f"'{sys.executable}' -m heaplab options | head -1; exit ${{PIPESTATUS[0]}}"
    p = run(["bash", "-c", cmd], cwd=tmp_path)
    assert p.stdout.startswith("mode"), p.stdout
    assert p.stderr == "", p.stderr
    assert p.returncode == 0


# ---- the pytest plugin outside the repository --------------------------------------------

PLUGIN_TEST = '''
def test_uses_the_lab_fixture(lab):
    lab.effect("EX", "answer", "42", "== 42", arm="only", ok=True)
'''


@pytest.mark.parametrize("how", ["-p heaplab", "autoload"])
def test_pytest_plugin_outside_the_repo(tmp_path, how):
    (tmp_path / "test_outside.py").write_text(PLUGIN_TEST)
    env = {"HEAPLAB_RESULTS": str(tmp_path / "results")}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_outside.py"]
    if how == "-p heaplab":
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
        args[3:3] = ["-p", "heaplab"]
    p = run(args, cwd=tmp_path, env=env)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "heaplab effects" in p.stdout and "answer" in p.stdout, p.stdout
    assert (tmp_path / "results" / "effects.json").exists()


def test_without_the_plugin_there_is_no_lab_fixture(tmp_path):
    """The check above can fail: with autoloading off and no -p, `lab` is unknown."""
    (tmp_path / "test_outside.py").write_text(PLUGIN_TEST)
    p = run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_outside.py"],
            cwd=tmp_path, env={"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert p.returncode == 1 and "fixture 'lab' not found" in p.stdout, p.stdout


def test_effects_table_fits_120_columns():
    lab = heaplab.pytest_plugin.Lab()
    lab.effect("E6", "each trim at the limit", "3 trims: gave up after 100/100/100 retries in "
               "130/134/138 ms; 1/1/1 call(s), 0/0/0 released, 128/128/128 back to the free pool",
               "100 retries, 0.1-1 s, 1 call, 0 released", arm="bounded", ok=True)
    lab.effect("E1", "returned", "99.9%", ">= 97% (warm cache aside)", arm="on", ok=True)
    lab.effect("E3", "growth", "723 MiB (2048 MiB/s)", "reported", arm="off_2048", ok=None)
    text = lab.render_effects()
    lines = text.splitlines()
    assert max(len(x) for x in lines) <= 120, text
    assert [c.strip() for c in lines[0].split(" | ")] == ["experiment", "arm", "effect", "ours",
                                                           "asserted", "ok"]
    assert "back to the free" in text and "pool" in text      # wrapped, not cut
    assert lines[-1].rstrip().endswith("-")                      # reported, not asserted


# ---- experiments inside the package -------------------------------------------------------

def test_experiment_module_works_outside_a_checkout(tmp_path):
    code = textwrap.dedent("""
        import os, heaplab
        from heaplab.notebooks import experiment_module
        m = experiment_module("e1")
        pkg = os.path.dirname(heaplab.__file__)
        assert m.__file__.startswith(os.path.join(pkg, "experiments")), m.__file__
        res = m.E1.run(env={"HEAPLAB_E1_FILL_MIB": "16", "HEAPLAB_E1_TEXTURES_MIB": "16"},
                       save=False)
        print(sorted(res), round(res["on"].phase("drop").returned / 2**20))
    """)
    p = run([sys.executable, "-c", code], cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.startswith("['huge', 'off', 'on']"), p.stdout


def test_e8_e10_programs_are_shipped_with_the_package(tmp_path):
    """E8 and E10 run Lua and Python programs (tests/clients/programs in a checkout): the
    installed package has them, and a missing launcher names PATH and the install, not
    a build folder inside site-packages."""
    code = textwrap.dedent("""
        import os, heaplab
        from heaplab.notebooks import experiment_module
        pkg = os.path.dirname(heaplab.__file__)
        for name, programs in (("e8", ["page_floor.lua", "page_floor.py"]),
                               ("e10", ["sparse_survivors.lua", "sparse_survivors.py"])):
            m = experiment_module(name)
            assert m.PROGRAMS.startswith(os.path.join(pkg, "experiments")), m.PROGRAMS
            for p in programs + ["client_record.lua", "client_record.py"]:
                assert os.path.isfile(os.path.join(m.PROGRAMS, p)), (name, m.PROGRAMS, p)
        try:
            m.launcher("heaplab-lua", "HEAPLAB_LUA_LAUNCHER")
        except BaseException as e:
            print(e)
        else:
            print("found a launcher")
    """)
    p = run([sys.executable, "-c", code], cwd=tmp_path,
            env={"PATH": "/usr/bin:/bin", "HEAPLAB_LUA_LAUNCHER": "", "BUILD": ""})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "heaplab-lua is not on PATH (/usr/bin:/bin)" in p.stdout, p.stdout
    assert "meson install" in p.stdout and "ninja -C build" not in p.stdout, p.stdout


# ---- the Lua guide's signatures ---------------------------------------------------------

LUA_PREFIX = {"h": "heap:", "o": "object:", "reg": "region:", "s": "sampler:", "heaplab": ""}


def _ldoc_params(root):
    """{LDoc name: [(param, default or None), ...]} from the @function blocks
    of bindings/lua/*.c (what `make docs` renders)."""
    out = {}
    lua = os.path.join(root, "bindings", "lua")
    for name in sorted(os.listdir(lua)):
        if not name.endswith(".c"):
            continue
        with open(os.path.join(lua, name)) as f:
            text = f.read()
        for block in re.findall(r"/\*\*\*(.*?)\*/", text, re.S):
            fn = re.search(r"@function ([\w:]+)", block)
            if fn:
                out[fn.group(1)] = [(p, d) for d, p in re.findall(
                    r"@tparam(?:\[opt(?:=([^\]]*))?\])? [\w|]+ (\w+)", block)]
    return out


def test_lua_guide_signatures_match_the_ldoc_reference():
    """Every call in the first column of docs/lua.md's API tables, and every
    `s:...(...)` with parameters its sampler paragraph names, gives the parameters the
    module's LDoc comments give, in order, with the same defaults: the
    table said h:fill(total_bytes, size, refs = 0) while h:fill takes a
    stride too, and s:series() while it takes start."""
    root = os.path.dirname(os.path.dirname(HERE))
    ldoc = _ldoc_params(root)
    assert len(ldoc) > 40 and ldoc["heap:fill"][:2] == [("total_bytes", ""), ("size", "")], ldoc
    with open(os.path.join(root, "docs", "lua.md")) as f:
        guide = f.read()
    calls = []
    for line in guide.splitlines():
        if line.startswith("| `"):
            calls += re.findall(r"`(\w+)[:.](\w+)\(([^`)]*)\)`", line.split(" | ")[0])
    # (in prose a call may leave its optional parameters out: only one
    # that gives them is checked)
    calls += re.findall(r"`(s):(\w+)\(([^`)]+)\)`", guide)
    checked, wrong = 0, []
    for who, method, args in calls:
        key = LUA_PREFIX.get(who, "?") + method
        if key not in ldoc or (args and "=" not in args and not re.fullmatch(r"[\w, ]+", args)):
            continue            # (a field such as heaplab.version; a call with values)
        given = [(a.split("=")[0].strip(), a.split("=")[1].strip().strip('"') if "=" in a
                  else "") for a in args.split(",") if a.strip()]
        want = [(p, (d or "").strip('"')) for p, d in ldoc[key]]
        names_ok = [p for p, _ in given] == [p for p, _ in want]
        defaults_ok = all(g == w or not w or g == "rest"
                          for (_, g), (_, w) in zip(given, want))
        checked += 1
        if not (names_ok and defaults_ok):
            wrong.append(f"{who}:{method}({args}) -- the reference: {key}"
                         f"({', '.join(p + ('=' + d if d else '') for p, d in want)})")
    assert checked >= 30, f"only {checked} calls found in docs/lua.md"
    short = {v: k for k, v in LUA_PREFIX.items()}
    for key in ldoc:            # and every function of the reference is in the guide
        kind, _, method = key.rpartition(":")
        who = short[kind + ":" if kind else ""]
        if not re.search(re.escape(f"`{who}{':' if kind else '.'}{method}") + r"[({]", guide):
            wrong.append(f"{key}: not in docs/lua.md")
    assert not wrong, "docs/lua.md disagrees with bindings/lua's LDoc:\n" + "\n".join(wrong)


# ---- the Python API at a glance ---------------------------------------------------------

def _glance():
    root = os.path.dirname(os.path.dirname(HERE))
    with open(os.path.join(root, "docs", "getting-started.md")) as f:
        text = f.read()
    start = text.index("## The Python API at a glance")
    return text[start:text.index("\n## ", start + 1)]


def test_python_api_at_a_glance_names_every_public_name():
    """docs/getting-started.md's *The Python API at a glance* names every
    name of heaplab.__all__ and every public method and property of Heap,
    Ref, ConservativeRegion and Sampler (h.churn, h.range, r.read, r.checksum,
    heaplab.stat_names... were in no document), and each call it shows with
    parameters has the signature's parameters, in order, with its defaults."""
    text = _glance()
    owners = {"h": heaplab.Heap, "r": heaplab.Ref, "reg": heaplab.ConservativeRegion,
              "s": heaplab.Sampler}
    missing = [n for n in heaplab.__all__ if not re.search(r"\b" + re.escape(n) + r"\b", text)]
    for who, cls in owners.items():
        for c in cls.__mro__:
            if c.__module__ != "heaplab" or c.__name__.startswith("_S"):
                continue
            for m, f in vars(c).items():
                if not m.startswith("_") and (callable(f) or isinstance(f, property)) \
                        and not re.search(rf"`{who}\.{m}\b", text):
                    missing.append(f"{cls.__name__}.{m} (as `{who}.{m}`)")
    assert not missing, f"not in getting-started.md's API at a glance: {missing}"
    wrong, checked = [], 0
    for who, name, args in re.findall(r"`(heaplab|h|r|reg|s)\.(\w+)\(([^`)]*)\)`", text):
        obj = getattr(owners.get(who, heaplab), name, None)
        if obj is None:
            wrong.append(f"{who}.{name}: no such function")
            continue
        if who == "heaplab" and name == "Heap":
            continue            # (**options: the option table, test_help_lists_every_option)
        params = [p for p in inspect.signature(obj).parameters.values() if p.name != "self"]
        want = [(p.name, "" if p.default is inspect.Parameter.empty else repr(p.default))
                for p in params]
        given = [(a.split("=")[0].strip(), a.split("=")[1].strip().replace('"', "'")
                  if "=" in a else "") for a in args.split(",") if a.strip()]
        checked += 1
        if given != want:
            wrong.append(f"{who}.{name}({args}): the code's is ({', '.join(p + ('=' + d if d else '') for p, d in want)})")
    assert checked >= 25, checked
    assert not wrong, "\n".join(wrong)


def test_every_option_is_named_in_the_docs():
    """Each option is named somewhere in README.md or docs/ (as `name`, name=
    or HEAPLAB_NAME), beside `heaplab options`' one line: adaptive_trigger
    and major_backstop_cycles were in none."""
    root = os.path.dirname(os.path.dirname(HERE))
    text = open(os.path.join(root, "README.md")).read()
    for top, _, files in os.walk(os.path.join(root, "docs")):
        text += "".join(open(os.path.join(top, n)).read() for n in files
                        if n.endswith(".md") and n not in ("performance.md", "mutants.md"))
    missing = [n for n in heaplab.options()
               if not re.search(rf"`[^`\n]*\b{n}\b[^`\n]*`|\b{n}\s*=|HEAPLAB_{n.upper()}\b", text)]
    assert not missing, f"options named in no document: {missing}"


def test_harness_md_names_every_records_csv_column():
    """docs/harness.md's paragraph on records.csv names each column of
    heaplab.harness.CSV_COLUMNS that is no FIGURE (those it names as
    `FIGURES`): session and started were left out."""
    root = os.path.dirname(os.path.dirname(HERE))
    with open(os.path.join(root, "docs", "harness.md")) as f:
        text = f.read()
    start = text.index("`results/<experiment>/records.csv` with one row per phase")
    para = text[start:text.index("\n\n", start)]
    missing = [c for c in heaplab.harness.CSV_COLUMNS
               if c not in heaplab.harness.FIGURES and not re.search(rf"\b{c}\b", para)]
    assert "`FIGURES`" in para and not missing, f"records.csv columns not in harness.md: {missing}"


def test_every_command_line_option_is_named_in_the_docs():
    """Each command of `heaplab` (python3 -m heaplab) and each of its options,
    and each option of python -m heaplab.notebooks, is named somewhere in
    README.md or docs/: `heaplab options --json`, `heaplab compare --effect`
    and `--json` were in none."""
    import argparse
    from heaplab.__main__ import build_parser
    root = os.path.dirname(os.path.dirname(HERE))
    text = open(os.path.join(root, "README.md")).read()
    for top, _, files in os.walk(os.path.join(root, "docs")):
        text += "".join(open(os.path.join(top, n)).read() for n in files
                        if n.endswith(".md") and n not in ("performance.md", "mutants.md"))
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    missing = []
    for name, p in sub.choices.items():
        if not re.search(rf"heaplab {name}\b", text):
            missing.append(f"heaplab {name}")
        for a in p._actions:
            missing += [f"heaplab {name} {o}" for o in a.option_strings
                        if o not in ("-h", "--help") and not re.search(re.escape(o) + r"\b", text)]
    src = inspect.getsource(heaplab.notebooks)
    for o in re.findall(r'add_argument\((?:"-\w", )?"(--[\w-]+)"', src):
        if not re.search(re.escape(o) + r"\b", text):
            missing.append(f"heaplab.notebooks {o}")
    assert not missing, f"named in no document: {missing}"


def test_design_md_lists_every_event_kind_and_field():
    """docs/design.md's table of events (*Measuring*) has a row for each event
    kind with each of its fields: restore_failed and pacing_wait were in no
    document, and most kinds' fields were named nowhere."""
    root = os.path.dirname(os.path.dirname(HERE))
    with open(os.path.join(root, "docs", "design.md")) as f:
        text = f.read()
    rows = {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", text, re.M)}
    wrong = []
    for kind, fields in heaplab._EVENTS:
        row = rows.get(kind)
        if row is None:
            wrong.append(f"{kind}: no row")
            continue
        named = set(re.findall(r"`(\w+)`", row.split(" | ")[-1]))
        named |= {f"thread{i}_bytes" for i in range(8)} if "thread0_bytes` ..." in row else set()
        wrong += [f"{kind}.{f}" for f in fields if f not in named]
    assert not wrong, f"not in docs/design.md's events table: {wrong}"


def test_every_lua_spec_and_preload_test_is_in_its_table():
    """Each busted spec of tests/lua has its row in docs/lua.md's table of
    specs, and each test of the preload suite (tests/preload/meson.build,
    its run.py scenarios) its row in docs/clients.md's -- a row may name a
    family, `preload_mlockall_*`, or add `_d`, `_glibc` to a name:
    handles_stay_equal_while_the_collector_moves_them and five preload tests
    had none."""
    root = os.path.dirname(os.path.dirname(HERE))

    def rows(doc):
        with open(os.path.join(root, "docs", doc)) as f:
            return [line.split(" | ")[0] for line in f if line.startswith("| `")]

    def covered(name, cells):
        for cell in cells:
            for stem in re.findall(r"`(\w+)\*?`", cell):
                if name == stem or ("`" + stem + "*`" in cell and name.startswith(stem)):
                    return True
                for suffix in re.findall(r"`(_\w+)`", cell):
                    if name in (stem + suffix, stem + "_glibc", stem + suffix + "_glibc"):
                        return True
        return False

    specs = [n[:-len("_spec.lua")] for n in os.listdir(os.path.join(root, "tests", "lua"))
             if n.endswith("_spec.lua")]
    lua_rows = rows("lua.md")
    missing = [s for s in specs if not covered(s, lua_rows)]
    with open(os.path.join(root, "tests", "preload", "meson.build")) as f:
        build = f.read()
    # (the suite's own tests: a name built by concatenation is a family of
    # rows, preload_threads_prefixed is suite threads' -- make test-tsan's)
    preload = {n for n, suite in re.findall(
        r"test\('(preload_\w+)',(?:[^()]|\([^()]*\))*?suite : ([^,)]+)", build)
        if "preload" in suite}
    preload |= {"preload_" + n for n in re.findall(r"^\s*'(\w+)' : \d+,", build, re.M)}
    clients_rows = rows("clients.md")
    missing += [t for t in sorted(preload) if not covered(t, clients_rows)
                and not covered(t[:-len("_glibc")] if t.endswith("_glibc") else "", clients_rows)]
    assert len(specs) > 15 and len(preload) > 40, (specs, preload)
    assert not missing, f"no row in docs/lua.md or docs/clients.md: {missing}"
