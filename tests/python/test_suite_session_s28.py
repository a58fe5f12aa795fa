"""The experiment suite as users run it (session 28's hunt of
`python -m pytest experiments`): the project's pytest configuration, the
protocol variables, the records and tables a session leaves, and what a
session stopped by a signal leaves running.  Each test runs a child pytest
or the harness against the installed package."""
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from procs import PYTEST

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _pytest(cwd, *args, env=None, timeout=120):
    e = dict(os.environ)
    e.pop("PYTEST_XDIST_WORKER", None)
    e.update(env or {})
    return subprocess.run([*PYTEST, *args], cwd=cwd, env=e,
                          capture_output=True, text=True, timeout=timeout)


# ---- 5: --lf ---------------------------------------------------------------------------

@pytest.mark.shares_the_machine
def test_last_failed_reruns_only_the_failures_under_the_projects_configuration(tmp_path):
    """pyproject.toml's addopts had `-p no:cacheprovider`: no cache was
    written, so `--lf` silently ran the whole suite again, and adding `-p
    cacheprovider` crashed ("option names {'--lf'} already added").  Under
    the project's own configuration the second session reruns the failure
    only."""
    shutil.copy(os.path.join(ROOT, "pyproject.toml"), tmp_path / "pyproject.toml")
    (tmp_path / "test_two.py").write_text(
        "def test_passes():\n    pass\n\ndef test_fails():\n    assert False\n")
    p = _pytest(tmp_path, "-q", "test_two.py")
    assert p.returncode == 1 and "1 failed, 1 passed" in p.stdout, p.stdout + p.stderr
    p = _pytest(tmp_path, "-q", "--lf", "test_two.py")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "1 failed, 1 deselected" in p.stdout, p.stdout + p.stderr
    assert (tmp_path / ".pytest_cache").is_dir()
    # the tree's .gitignore keeps it out of git
    assert re.search(r"^/?\.pytest_cache/?$", open(os.path.join(ROOT, ".gitignore")).read(),
                     re.M)


# ---- 2 and 9: protocol variables --------------------------------------------------------

EXPERIMENTS = os.path.join(ROOT, "experiments")


# what each variable's bad value must say, and the experiment tests that read
# it (as -k selects them, and as they are reported)
BAD_PROTOCOL_VALUES = [
    ("HEAPLAB_E10_N", "abc", "HEAPLAB_E10_N='abc': expected a comma list of whole numbers, "
                             "each in 2..100000"),
    ("HEAPLAB_E10_N", "0", "HEAPLAB_E10_N='0'"),
    ("HEAPLAB_E10_OBJECTS", "2.5", "HEAPLAB_E10_OBJECTS='2.5': expected a whole number in "
                                   "100000..50000000"),
    ("HEAPLAB_E1_FILL_MIB", "nan", "HEAPLAB_E1_FILL_MIB='nan': expected a number in 16..4096 MiB"),
    ("HEAPLAB_E1_FILL_MIB", "inf", "HEAPLAB_E1_FILL_MIB='inf'"),
    ("HEAPLAB_E1_FILL_MIB", "1", "HEAPLAB_E1_FILL_MIB='1'"),     # under the 4 MiB warm cache
]
PROTOCOL_VARIABLE_READERS = {
    "HEAPLAB_E10_N": ("test_e10_sparse_survivors and not on_real_interpreters",
                      ["experiments/test_e10_sparse_survivors.py::test_e10_sparse_survivors"]),
    "HEAPLAB_E10_OBJECTS": ("test_e10_sparse_survivors_on_real_interpreters",
                            ["experiments/test_e10_sparse_survivors.py::"
                             f"test_e10_sparse_survivors_on_real_interpreters[{lang}]"
                             for lang in ("lua", "python")]),
    "HEAPLAB_E1_FILL_MIB": ("test_e1_page_floor",
                            ["experiments/test_e1_page_floor.py::test_e1_page_floor"]),
}


@pytest.mark.shares_the_machine
@pytest.mark.parametrize("values", [(0, 2, 3), (1, 4), (5,)],
                         ids=lambda v: "+".join(BAD_PROTOCOL_VALUES[i][1] for i in v))
def test_a_bad_protocol_variable_fails_the_test_that_reads_it_naming_it(tmp_path, values):
    """A bad protocol variable aborted every selection at collection
    ("Interrupted: 1 error during collection", `invalid literal for int()`,
    no variable named), or ran out of range (HEAPLAB_E1_FILL_MIB=1:
    "returned -0.0%", as if a defect; HEAPLAB_E10_N=0 failed inside the
    arm).  Now the suite collects, and the experiment's test fails before
    any arm runs, naming the variable, its value and the range.  (Each
    session sets one bad value of several variables: the whole experiments
    folder is collected, the tests reading them run, each failing on its own
    variable.)"""
    bad = [BAD_PROTOCOL_VALUES[i] for i in values]
    env = {var: value for var, value, _ in bad}
    env["HEAPLAB_RESULTS"] = str(tmp_path / "results")
    env["COLUMNS"] = "250"          # (the short summary's lines whole)
    expr = " or ".join(f"({PROTOCOL_VARIABLE_READERS[var][0]})" for var, _, _ in bad)
    p = _pytest(ROOT, "-q", "-p", "no:cacheprovider", "-rf", "experiments", "-k", expr,
                env=env)
    out = p.stdout + p.stderr
    # collected whole (a collection error: exit 2, "N error(s)"), the readers failed
    assert p.returncode == 1, out
    last = p.stdout.strip().splitlines()[-1]
    assert re.fullmatch(r"\d+ failed, \d+ deselected in .*", last), out
    failed = {ln.split()[1]: ln for ln in p.stdout.splitlines() if ln.startswith("FAILED ")}
    for var, value, needle in bad:
        for test in PROTOCOL_VARIABLE_READERS[var][1]:
            assert test in failed, (var, test, out)
            assert needle in failed.pop(test), (var, needle, out)
    assert not failed, f"other tests failed: {failed}"
    # no arm ran: the check comes first
    assert " ... " not in p.stdout, p.stdout


def test_protocol_variables_are_one_checker():
    from heaplab.harness import ProtocolVariable
    v = ProtocolVariable("HEAPLAB_X_MIB", 192, 16, 4096, "MiB")
    assert v.value({}) == 192 and v.value({"HEAPLAB_X_MIB": ""}) == 192
    assert v.value({"HEAPLAB_X_MIB": "32"}) == 32.0
    for bad in ("abc", "nan", "inf", "-inf", "8", "5000"):
        with pytest.raises(ValueError, match=r"HEAPLAB_X_MIB='.*': expected a number in "
                                             r"16\.\.4096 MiB"):
            v.value({"HEAPLAB_X_MIB": bad})
    n = ProtocolVariable("HEAPLAB_X_N", 10, 2, 100, integer=True)
    assert n.value({"HEAPLAB_X_N": "1e1"}) == 10
    with pytest.raises(ValueError, match="whole number"):
        n.value({"HEAPLAB_X_N": "2.5"})
    many = ProtocolVariable("HEAPLAB_X_NS", (10, 100), 2, 1000, integer=True, many=True)
    assert many.value({"HEAPLAB_X_NS": "3,30"}) == (3, 30)
    assert many.value_or_default({"HEAPLAB_X_NS": "abc"}) == (10, 100)
    # every experiment takes its variables from one table, through this checker
    sys.path.insert(0, EXPERIMENTS)
    try:
        import protocol
    finally:
        sys.path.remove(EXPERIMENTS)
    names = {p.var for p in vars(protocol).values() if isinstance(p, ProtocolVariable)}
    assert {"HEAPLAB_E1_FILL_MIB", "HEAPLAB_E10_N", "HEAPLAB_E10_OBJECTS", "HEAPLAB_E8_MIB",
            "HEAPLAB_E9_KEYS"} <= names, names
    for path in os.listdir(EXPERIMENTS):
        if path.startswith("test_e") and path.endswith(".py"):
            src = open(os.path.join(EXPERIMENTS, path)).read()
            assert "env_number(" not in src, path
            # (each experiment read its own: an os.environ.get of its own variables)
            assert not re.search(r'environ\.get\("HEAPLAB' + r'_E\d', src), path


SMALL_E1 = {"HEAPLAB_E1_FILL_MIB": "16", "HEAPLAB_E1_TEXTURES_MIB": "8"}


def test_overridden_sizes_are_recorded_and_the_table_says_so(tmp_path):
    """HEAPLAB_E1_FILL_MIB=32 was not recorded (params {}), and table.txt
    printed the seed's 192 MB figures beside the small run's results as if
    comparable.  The arm JSON now records the sizes run (params["protocol"],
    and protocol_overridden), and the table's seed cells say the run's
    sizes were not the protocol's."""
    import json
    results = tmp_path / "results"
    p = _pytest(EXPERIMENTS, "-q", "-p", "no:cacheprovider", "test_e1_page_floor.py",
                env=dict(SMALL_E1, HEAPLAB_RESULTS=str(results)), timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    on = json.loads((results / "E1" / "on.json").read_text())
    assert on["params"]["protocol"] == {"HEAPLAB_E1_FILL_MIB": 16.0,
                                        "HEAPLAB_E1_TEXTURES_MIB": 8.0}, on["params"]
    assert on["protocol_overridden"] == on["params"]["protocol"]
    table = (results / "table.txt").read_text()
    seeded = [ln for ln in table.splitlines() if "466,224 -> 287,824 KB" in ln]
    assert seeded and all("this run: HEAPLAB_E1_FILL_MIB=16.0, HEAPLAB_E1_TEXTURES_MIB=8.0"
                          in ln for ln in seeded), table


# ---- 10: the environment's settings, the docs' selectors, -0.0% --------------------------

INNER = "def test_one(lab):\n    lab.effect('E', 'w', '1', '1', ok=True)\n"


@pytest.mark.shares_the_machine
def test_an_empty_results_variable_means_results(tmp_path):
    """HEAPLAB_RESULTS= (empty) wrote the records to ./E4b, then the tables
    failed "cannot write the tables under :"."""
    (tmp_path / "test_one.py").write_text(INNER)
    p = _pytest(tmp_path, "-q", "-p", "no:cacheprovider", "test_one.py",
                env={"HEAPLAB_RESULTS": ""})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "cannot write the tables" not in p.stdout, p.stdout
    assert (tmp_path / "results" / "effects.txt").exists()


@pytest.mark.shares_the_machine
@pytest.mark.parametrize("where", ["file", "/proc/x"])
def test_an_unwritable_results_folder_is_refused_at_the_start(tmp_path, where):
    """An unwritable HEAPLAB_RESULTS (a file, /proc/x) failed each test
    after its first arm with a bare FileNotFoundError; now the session stops
    at its start, naming the variable."""
    (tmp_path / "test_one.py").write_text(INNER)
    bad = str(tmp_path / "a-file") if where == "file" else where
    if where == "file":
        (tmp_path / "a-file").write_text("")
    p = _pytest(tmp_path, "-q", "-p", "no:cacheprovider", "test_one.py",
                env={"HEAPLAB_RESULTS": bad})
    assert p.returncode == 4, p.stdout + p.stderr          # pytest's usage error
    assert f"HEAPLAB_RESULTS={bad!r}" in p.stderr, p.stdout + p.stderr
    assert "passed" not in p.stdout


@pytest.mark.shares_the_machine
@pytest.mark.parametrize("value", ["0", "2.5", "abc"])
def test_a_bad_repeat_variable_is_refused_at_the_start(tmp_path, value):
    """A bad HEAPLAB_REPEAT failed every Python test separately; now the
    session stops at its start, as --repeat 0 does."""
    (tmp_path / "test_one.py").write_text(INNER)
    p = _pytest(tmp_path, "-q", "-p", "no:cacheprovider", "test_one.py",
                env={"HEAPLAB_REPEAT": value, "HEAPLAB_RESULTS": str(tmp_path / "r")})
    assert p.returncode == 4, p.stdout + p.stderr
    assert f"HEAPLAB_REPEAT={value!r}: expected a whole number of repeats >= 1" in p.stderr, \
        p.stdout + p.stderr


# a plugin for one child session: the tests each -k expression (the JSON list
# in $SELECTORS_IN) selects, by pytest's own -k matching (deselect_by_keyword's
# Expression and KeywordMatcher), written to $SELECTORS_OUT as {expr: [node ids]}
# (pytest's private modules: a pytest without them, or whose names changed,
# writes null, and the test runs one child session per selector instead, as it
# did before)
SELECTORS_PLUGIN = """
import json, os

def pytest_collection_finish(session):
    try:
        from _pytest.mark import KeywordMatcher
        from _pytest.mark.expression import Expression
        out = {}
        for expr in json.loads(os.environ["SELECTORS_IN"]):
            e = Expression.compile(expr)
            out[expr] = [i.nodeid for i in session.items
                         if e.evaluate(KeywordMatcher.from_item(i))]
    except Exception:               # (moved, renamed, another signature)
        out = None
    with open(os.environ["SELECTORS_OUT"], "w") as f:
        json.dump(out, f)
"""


@pytest.mark.shares_the_machine
def test_the_experiment_docs_selectors_select_their_experiment(tmp_path):
    """docs/experiments/e1.md's `-k "e1_page or lua_e1"` also ran
    test_lua_e10_sparse_survivors.  Each `-k` of a doc of experiment N (but a
    `not ...` recipe) selects tests of experiment N only.  (One collection
    for all of them, matched by pytest's own -k code in a plugin; the first
    is also run as the docs say, and must select the same tests.)"""
    import glob
    import json
    wanted = []                     # (doc, n, expr)
    for doc in sorted(glob.glob(os.path.join(ROOT, "docs", "experiments", "e*.md"))):
        n = re.fullmatch(r"e(\d+)\.md", os.path.basename(doc)).group(1)
        text = open(doc).read()
        for m in re.finditer(r"pytest experiments[^`]*?-k (\"[^\"]+\"|[^\s`]+)", text):
            expr = m.group(1).strip('"')
            if not expr.startswith("not "):
                wanted.append((os.path.basename(doc), n, expr))
    assert len(wanted) >= 5, wanted
    (tmp_path / "selectors_plugin.py").write_text(SELECTORS_PLUGIN)
    out = tmp_path / "selected.json"
    env = {"SELECTORS_IN": json.dumps(sorted({e for _, _, e in wanted})),
           "SELECTORS_OUT": str(out),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path),
                                                        os.environ.get("PYTHONPATH")]))}
    p = _pytest(ROOT, "-q", "-p", "no:cacheprovider", "-p", "selectors_plugin",
                "--collect-only", "experiments", env=env)
    assert p.returncode == 0 and out.exists(), p.stdout + p.stderr
    selected = json.loads(out.read_text())
    if selected is None:            # (no _pytest.mark internals: one session each)
        selected = {}
        for expr in {e for _, _, e in wanted}:
            p = _pytest(ROOT, "-q", "-p", "no:cacheprovider", "--collect-only", "experiments",
                        "-k", expr)
            selected[expr] = [ln for ln in p.stdout.splitlines() if "::" in ln]
    for doc, n, expr in wanted:
        ids = selected[expr]
        assert ids, (doc, expr, p.stdout + p.stderr)
        wrong = [i for i in ids if not re.search(rf"e{n}(?!\d)", i.split("::")[-1].lower())]
        assert not wrong, f"{doc}: -k {expr!r} also selects {wrong}"
    # the plugin matches as -k does
    doc, n, expr = wanted[0]
    p = _pytest(ROOT, "-q", "-p", "no:cacheprovider", "--collect-only", "experiments", "-k", expr)
    ids = [ln for ln in p.stdout.splitlines() if "::" in ln]
    assert ids == selected[expr], (expr, ids, selected[expr])


def test_a_share_that_rounds_to_nothing_is_0_0_percent():
    """E1's effect text printed "-0.0%"."""
    from heaplab.harness import percent
    assert percent(-0.0001) == "0.0%" and percent(0.0) == "0.0%"
    assert percent(0.973) == "97.3%" and percent(-0.5) == "-50.0%"
    sys.path.insert(0, EXPERIMENTS)
    try:
        for name in ("test_e1_page_floor", "test_e7_stale_roots", "test_e10_sparse_survivors"):
            src = open(os.path.join(EXPERIMENTS, name + ".py")).read()
            assert "return percent(x)" in src, name
    finally:
        sys.path.remove(EXPERIMENTS)


# ---- 3 and 4: which arms get the caller's HEAPLAB_<OPTION> variables ----------------------

ARM_PRINTER = ("import json, os; print(json.dumps({'experiment': 'L', 'arm': 'a', "
               "'options': {'page_size': 65536}, 'records': [], 'error': None}))")


def test_a_command_arm_that_gets_the_variables_records_them(monkeypatch):
    """Lua arms (run_command_arm without an allocator) get HEAPLAB_<OPTION>
    variables, and their records did not say so (E1/lua-on.json had no
    environment_options, E1/on.json had).  An arm that drops HEAPLAB_*
    records none; the arm's own env= and own options are not the caller's."""
    from heaplab.harness import run_command_arm
    monkeypatch.setenv("HEAPLAB_PAGE_RELEASE", "false")
    monkeypatch.setenv("HEAPLAB_PAGE_SIZE", "16k")       # the arm sets its own page_size
    monkeypatch.setenv("HEAPLAB_VERIFY", "true")
    data = run_command_arm([sys.executable, "-c", ARM_PRINTER],
                           env={"HEAPLAB_VERIFY": "false"})
    assert data["environment_options"] == {"page_release": "false"}, data
    data = run_command_arm([sys.executable, "-c", ARM_PRINTER], drop=("HEAPLAB_",))
    assert data["environment_options"] == {}, data


@pytest.mark.shares_the_machine
def test_the_footer_names_the_arms_the_variables_reach(tmp_path):
    """The footer said "command arms on an allocator do not get it" -- the
    real-interpreter arms that drop HEAPLAB_* are no allocator arms, and the
    Lua arms that get it recorded nothing.  It now names the session's arms
    that got the variables and those that did not, from their records."""
    (tmp_path / "test_two.py").write_text(textwrap.dedent('''
        def arm(exp, name, env):
            return {"experiment": exp, "arm": name, "environment_options": env, "records": [
                {"experiment": exp, "arm": name, "phase": "p", "index": 0, "phys_before": 0,
                 "phys_after": 1, "phys_peak": 1, "phys_low_after_mark": None,
                 "resident_after": None}]}
        def test_one(lab):
            lab.record([arm("E1", "lua-on", {"generational": "1"}),
                        arm("E8", "lua/on", {})])
    '''))
    p = _pytest(tmp_path, "-q", "-p", "no:cacheprovider", "test_two.py",
                env={"HEAPLAB_GENERATIONAL": "1", "HEAPLAB_RESULTS": str(tmp_path / "r")})
    assert p.returncode == 0, p.stdout + p.stderr
    assert "command arms on an allocator do not get it" not in p.stdout, p.stdout
    assert "arms that got it: E1; that did not: E8" in p.stdout, p.stdout


@pytest.mark.shares_the_machine
def test_e2_docs_generational_recipe_says_what_it_runs():
    """docs/experiments/e2.md's `HEAPLAB_GENERATIONAL=1 ... -k "not lua and
    not e2"` said "8 passed" (it selects 12), and did not say that E8, E9 and
    E10's interpreter arms drop HEAPLAB_* and never run generational."""
    text = open(os.path.join(ROOT, "docs", "experiments", "e2.md")).read()
    flat = " ".join(text.split())
    m = re.search(r'-k "not lua and not e2"`: (\d+) passed', flat)
    assert m, "the recipe and its count"
    p = _pytest(ROOT, "-q", "-p", "no:cacheprovider", "--collect-only", "experiments", "-k",
                "not lua and not e2")
    selected = [ln for ln in p.stdout.splitlines() if "::" in ln]
    assert int(m.group(1)) == len(selected), (m.group(0), selected)
    for needle in ("E8", "E9", "drop the caller's `HEAPLAB_*`"):
        assert needle in flat, needle


# ---- 7: what a results folder may hold ---------------------------------------------------

def _arm(experiment, arm, **extra):
    return dict({"experiment": experiment, "title": "t", "arm": arm, "options": {}, "params": {},
                 "error": None, "notes": {}, "series": [],
                 "records": [{"experiment": experiment, "arm": arm, "phase": "p", "index": 0,
                              "phys_before": 1, "phys_after": 2}]}, **extra)


def test_another_experiments_arm_in_a_folder_is_left_out_and_duplicates_named(tmp_path):
    """A copied E5/on.json inside results/E4b/ gave E4b/records.csv (and
    load_arms, the reports) E5's rows; two files of one arm gave rows told
    apart by nothing.  The stray is left out with a warning; the duplicate
    is named."""
    import csv
    import json
    from heaplab.harness import load_arms, write_csv
    e4b = tmp_path / "E4b"
    e4b.mkdir()
    (e4b / "lifo.json").write_text(json.dumps(_arm("E4b", "lifo")))
    (e4b / "on.json").write_text(json.dumps(_arm("E5", "on")))           # copied in
    with pytest.warns(UserWarning, match=r"on\.json: an arm of experiment 'E5' in the folder "
                                         r"of E4b: not this folder's: left out"):
        write_csv(str(e4b))
    rows = list(csv.DictReader(open(e4b / "records.csv")))
    assert {(r["experiment"], r["arm"]) for r in rows} == {("E4b", "lifo")}, rows
    skipped = []
    with pytest.warns(UserWarning, match="not this folder's"):
        got = load_arms(str(tmp_path), skipped=skipped)
    assert [(a["experiment"], a["arm"]) for a in got] == [("E4b", "lifo")]
    assert [os.path.basename(p) for p, _ in skipped] == ["on.json"]
    # the same arm twice in one folder: named
    (e4b / "on.json").unlink()
    (e4b / "lifo (copy).json").write_text(json.dumps(_arm("E4b", "lifo")))
    # (the warning said "their records' session tells them apart" of arms that
    # carry no session -- bench.py's records, hand-made ones: nothing does)
    with pytest.warns(UserWarning, match=r"are both experiment E4b arm 'lifo': two runs of one "
                                         r"arm side by side \(nothing in records.csv tells them "
                                         r"apart: not both carry a session\)"):
        write_csv(str(e4b))
    for name, sid in (("lifo.json", "s1"), ("lifo (copy).json", "s2")):
        (e4b / name).write_text(json.dumps(_arm("E4b", "lifo", session={"id": sid})))
    with pytest.warns(UserWarning, match=r"side by side \(records.csv's session column tells "
                                         r"them apart\)"):
        write_csv(str(e4b))
    rows = list(csv.DictReader(open(e4b / "records.csv")))
    assert sorted(r["session"] for r in rows) == ["s1", "s2"], rows


# ---- 8: which session wrote an arm's record; an interrupted command arm's record ----------

TWO_ARMS = '''
from heaplab.harness import Experiment
T = Experiment("T", "two sessions")

@T.arm("a")
def a(rec, **options):
    with rec.phase("p"):
        pass
'''


def test_every_arm_json_names_its_session_and_start(experiment_source, tmp_path):
    """Arm JSONs carried no session id or time: an interrupted session's
    records and a later one's side by side were told apart by nothing."""
    import csv
    import json
    from heaplab import harness
    mod = experiment_source("two_sessions_mod", TWO_ARMS)
    before = harness.set_session(harness.new_session())
    try:
        first = mod.T.run()["a"].data["session"]
        harness.set_session(harness.new_session())
        second = mod.T.run()["a"].data
    finally:
        harness.set_session(before)
    assert set(first) == {"id", "started"} and first["id"] != second["session"]["id"]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", second["started"]), second
    saved = json.loads((tmp_path / "results" / "T" / "a.json").read_text())
    assert saved["session"] == second["session"]
    rows = list(csv.DictReader(open(tmp_path / "results" / "T" / "records.csv")))
    assert rows[0]["session"] == second["session"]["id"] and rows[0]["started"], rows


INTERRUPTED_E9_LIKE = '''
import os, signal, sys, threading, time
from heaplab.harness import run_command_arm, saving_interrupted, ArmInterrupted

def script(ctl):
    with ctl.phase("load"):
        pass
    with ctl.phase("delete"):
        threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)).start()
        for _ in range(600):
            time.sleep(0.05)

def finish(data):
    data.setdefault("params", {})["keys"] = 10

try:
    with saving_interrupted(finish):
        run_command_arm(["sleep", "30"], allocator="glibc", script=script, experiment="T9",
                        arm="redis/x", timeout=60)
except ArmInterrupted:
    print("interrupted")
'''


@pytest.mark.shares_the_machine
def test_an_interrupted_command_arm_saves_its_record(tmp_path):
    """An interrupted command arm on an allocator (E9's) raised a bare
    KeyboardInterrupt: no record was saved, where an Experiment arm saves
    its records so far marked "interrupted".  Now it raises ArmInterrupted
    with them, and the runner saves them (saving_interrupted)."""
    import json
    (tmp_path / "e9like.py").write_text(INTERRUPTED_E9_LIKE)
    e = dict(os.environ, HEAPLAB_RESULTS=str(tmp_path / "results"))
    p = subprocess.run([sys.executable, str(tmp_path / "e9like.py")], env=e, cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert "interrupted" in p.stdout, p.stdout + p.stderr
    data = json.loads((tmp_path / "results" / "T9" / "redis_x.json").read_text())
    assert data["interrupted"] is True and "interrupted" in data["error"], data["error"]
    assert [r["phase"] for r in data["records"]] == ["load", "delete"], data["records"]
    assert data["records"][1]["status"] == "raised: KeyboardInterrupt", data["records"][1]
    assert data["params"]["keys"] == 10 and data["session"]["id"], data


# ---- 6: what the tables cover -------------------------------------------------------------

COVERED = '''
import os, sys
from heaplab.harness import run_command_arm

def rec(exp, arm):
    return {"experiment": exp, "arm": arm, "records": [
        {"experiment": exp, "arm": arm, "phase": "p", "index": 0, "phys_before": 0,
         "phys_after": 1, "phys_peak": 1, "phys_low_after_mark": None, "resident_after": None}]}

def test_e1(lab):
    lab.record(rec("E1", "on"))
    lab.effect("E1", "w", "1", "1", arm="on", phase="p", ok=True)
    assert not os.environ.get("FAIL_E1"), "E1 failed"
    if os.environ.get("INTERRUPT"):
        raise KeyboardInterrupt

def test_e4b(lab):
    lab.record(rec("E4b", "lifo"))
    lab.effect("E4b", "w", "1", "1", arm="lifo", phase="p", ok=True)

import pytest

@pytest.mark.bench
def test_bench():
    pass

def test_e5():
    if os.environ.get("KILL_E5"):    # an arm that dies without its JSON (SIGKILL)
        run_command_arm([sys.executable, "-c", "import os; os.kill(os.getpid(), 9)"],
                        experiment="E5", label="E5/on")
'''


@pytest.mark.shares_the_machine
def test_the_tables_say_what_they_cover(tmp_path):
    """A -k / -x / failing session replaced results/table.txt, effects.txt
    and effects.json with its part, unmarked (after a full run, -k e4b left
    E4b's rows only; an arm killed by SIGKILL left effects.txt without E5,
    nothing saying E5 failed), and stale table.interrupted.* files stayed.
    Now each table's first line (and effects.json's "session") says the
    selection, the tests run, the failed tests, the experiments with rows
    and those whose arms started and left none, and the exit status; a
    complete session removes an interrupted one's tables."""
    import json
    (tmp_path / "test_cover.py").write_text(COVERED)
    # (as the project's: a -m of the configuration's is the suite's own
    # definition, its deselection no selection)
    (tmp_path / "pytest.ini").write_text("[pytest]\nmarkers =\n  bench: b\n"
                                         "addopts = -m 'not bench'\n")
    results = tmp_path / "results"
    env = {"HEAPLAB_RESULTS": str(results)}

    def session(*args, **extra):
        # (no file named: the folder's tests, a complete session)
        p = _pytest(tmp_path, "-q", "-p", "no:cacheprovider", *args, env=dict(env, **extra))
        first = (results / "table.txt").read_text().splitlines()[0]
        assert (results / "effects.txt").read_text().splitlines()[0] == first
        return p, first, json.loads((results / "effects.json").read_text())

    p, first, doc = session()
    assert p.returncode == 0, p.stdout + p.stderr
    assert first.startswith("heaplab: complete session "), first
    assert "3 of 4 collected tests ran (1 deselected by the configuration's own" in first, first
    assert doc["session"]["complete"] is True and [e["experiment"] for e in doc["effects"]] == \
        ["E1", "E4b"], doc
    p, first, doc = session("-k", "e4b")
    assert first.startswith("heaplab: PARTIAL session ") and "-k 'e4b'" in first, first
    assert "1 of 4 collected tests ran (3 deselected)" in first, first
    assert "experiments with rows: 1 (E4b)" in first and "exit status 0" in first, first
    assert doc["session"]["selection"]["keyword"] == "e4b" and not doc["session"]["complete"]
    p, first, doc = session(KILL_E5="1")
    assert p.returncode == 1, p.stdout + p.stderr
    assert "failed tests: test_cover.py::test_e5" in first, first
    assert "experiments whose arms started and left no rows: E5" in first, first
    assert "exit status 1" in first and doc["session"]["experiments_without_rows"] == ["E5"]
    # -x after a failure: the tests after it never ran (no -k, nothing the
    # command line deselected: it was called complete)
    p, first, doc = session("-x", FAIL_E1="1")
    assert p.returncode == 1 and first.startswith("heaplab: PARTIAL session "), first
    assert "1 of 4 collected tests ran" in first and "(2 selected did not run" in first, first
    assert doc["session"]["complete"] is False, doc["session"]
    # an interrupted session's tables, then a complete one removes them
    p = _pytest(tmp_path, "-q", "-p", "no:cacheprovider", env=dict(env, INTERRUPT="1"))
    assert p.returncode == 2 and (results / "table.interrupted.txt").exists(), p.stdout
    p, first, doc = session()
    assert p.returncode == 0, p.stdout + p.stderr
    assert not any((results / n).exists() for n in ("table.interrupted.txt",
                                                    "effects.interrupted.txt",
                                                    "effects.interrupted.json"))
    assert "removed the tables of an earlier interrupted session" in p.stdout, p.stdout


# ---- 1: SIGTERM, SIGHUP and SIGKILL to pytest leave nothing running ----------------------

SLOW_ARMS = '''
import os, time
from heaplab.harness import Experiment, run_command_arm

T = Experiment("T", "slow")


@T.arm("slow")
def slow(rec, **options):
    with rec.phase("p"):
        with open(os.environ["PIDFILE"] + ".tmp", "w") as f:
            f.write(str(os.getpid()))
        os.rename(os.environ["PIDFILE"] + ".tmp", os.environ["PIDFILE"])     # in the phase
        time.sleep(60)


def test_experiment():
    T.run(timeout=120)


def test_command():
    def script(ctl):
        with ctl.phase("p"):
            with open(os.environ["PIDFILE"] + ".tmp", "w") as f:
                f.write(f"{ctl.pid} {os.getpgid(ctl.pid)}")
            os.rename(os.environ["PIDFILE"] + ".tmp", os.environ["PIDFILE"])  # in the phase
            for _ in range(1200):
                time.sleep(0.05)
    run_command_arm(["sleep", "60"], allocator="glibc", script=script, experiment="T9",
                    arm="x", timeout=120)
'''


@pytest.mark.parametrize("signame", ["SIGTERM", "SIGHUP", "SIGKILL"])
@pytest.mark.parametrize("kind", ["experiment", "command"])
def test_a_signal_to_pytest_leaves_no_arm_running(tmp_path, kind, signame):
    """SIGTERM (or SIGHUP) to pytest left the arm processes running -- E6's
    unbounded arm reparented to init, spinning at the map limit; E5's arm
    (in a session of its own); E9's redis-server and its `sleep infinity`
    keeper -- while Ctrl-C stopped them.  Now SIGTERM and SIGHUP end the
    session as Ctrl-C does (exit 2, the arm's record saved "interrupted"),
    and every process the harness starts dies with it even when pytest is
    killed by SIGKILL (PR_SET_PDEATHSIG)."""
    import json
    from procs import gone, reap
    (tmp_path / "test_slow.py").write_text(SLOW_ARMS)
    pidfile = tmp_path / "pid"
    e = dict(os.environ, PIDFILE=str(pidfile), HEAPLAB_RESULTS=str(tmp_path / "results"))
    e.pop("PYTEST_XDIST_WORKER", None)
    # the child starts with SIGHUP's default: under `nohup make test` it inherited
    # nohup's SIG_IGN, which the plugin leaves alone by design, and the SIGHUP case
    # waited out its 60 s (the fresh-clone CI of session 28, run under nohup)
    hup = signal.signal(signal.SIGHUP, signal.SIG_DFL)
    try:
        p = subprocess.Popen([*PYTEST, "-q", "-p", "no:cacheprovider",
                              f"test_slow.py::test_{kind}"], cwd=tmp_path, env=e,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             start_new_session=True)
    finally:
        signal.signal(signal.SIGHUP, hup)
    pids = []
    try:
        from procs import wait_for_file
        # (written in the arm's phase: the signal comes while it runs)
        pids = [int(x) for x in wait_for_file(str(pidfile), p).split()]
        p.send_signal(getattr(signal, signame))
        out, _ = p.communicate(timeout=60)
        end = time.monotonic() + 10
        while not all(gone(pid) for pid in pids) and time.monotonic() < end:
            time.sleep(0.05)
        assert all(gone(pid) for pid in pids), (
            f"left running after {signame}: {[x for x in pids if not gone(x)]}\n{out}")
        if signame == "SIGKILL":
            assert p.returncode == -signal.SIGKILL
            return
        assert p.returncode == 2, out
        folder = tmp_path / "results" / ("T" if kind == "experiment" else "T9")
        if kind == "experiment":
            data = json.loads((folder / "slow.json").read_text())
            assert data["interrupted"] is True, data
    finally:
        reap(p, *pids, group=True)
