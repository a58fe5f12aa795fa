"""The mutation list of `make mutants` (tools/mutants.toml) still matches the
tree: every mutation's text is found exactly once where it says (so a move of
the code is noticed in make test, not months later in a mutation run), every
test it names exists, and docs/mutants.md lists every mutation.  Cheap: no
build, no mutant is run here."""
import os
import subprocess
import sys
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(ROOT, "tools", "mutants.py")

pytestmark = pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib (Python 3.11+)")


def _mutants():
    sys.path.insert(0, os.path.dirname(TOOL))
    try:
        import mutants
    finally:
        sys.path.pop(0)
    return mutants


def test_every_mutation_applies_and_names_existing_tests():
    p = subprocess.run([sys.executable, TOOL, "--check"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_the_list_covers_the_defect_classes_and_the_docs_list_it():
    m = _mutants()
    muts = m.load()
    assert len(muts) >= 17
    with open(os.path.join(ROOT, "docs", "mutants.md"), encoding="utf-8") as f:
        doc = f.read()
    missing = [x["name"] for x in muts if f"`{x['name']}`" not in doc]
    assert not missing, f"docs/mutants.md does not list {missing}"
    # issue 22's seven holes each have the test written for them first
    first = {x["name"]: x["tests"][0] for x in muts}
    assert first["quiet-counts-large-default-off"] == "c:large_churn_is_not_quiet_on_defaults"
    assert first["fill-ignores-stride"] == "c:fill_stride_keeps_every_nth_object"
    assert first["pacing-never-gives-up"] == "c:pacing_gives_up_after_dry_cycles"
    assert first["major-swept-pages-feed-the-trigger"] == "py:tests/python/test_major_sweep_trigger.py"
    for name in ("reuse-failed-order-default-lifo", "upgrade-budget-default-scanned",
                 "restore-before-format-default-off"):
        assert first[name] == "py:tests/python/test_control_defaults.py"
    assert first["side-table-bits-kept"] == "c:released_pages_release_their_side_table_bits"
    assert first["large-set-deletion-off-by-one"] == "c:large_objects_survive_churn"


def test_a_lua_spec_is_a_test_kind():
    # lua:NAME, a busted spec that meson test runs in build/ (the Lua
    # binding's defects: lua-region-address-read-unheld)
    m = _mutants()
    assert m.check_tests_exist({"tests": ["lua:conservative_region"]}, ROOT) == []
    errors = m.check_tests_exist({"tests": ["lua:no_such_spec"]}, ROOT)
    assert errors and "not in bindings/lua/meson.build" in errors[0]
    assert m.on_meson("lua:conservative_region") and m.on_meson("c:x")
    assert not m.on_meson("py:tests/python/test_api.py")


def test_a_clients_scenario_is_a_test_kind():
    # clients:NAME, a test of suite clients that meson test runs in build/
    # (the launchers' defects: lua-launcher-exit-status-lost), from either
    # scenario dict of tests/clients/meson.build
    m = _mutants()
    assert m.check_tests_exist({"tests": ["clients:lua_report", "clients:lua_options"]}, ROOT) == []
    errors = m.check_tests_exist({"tests": ["clients:no_such_scenario"]}, ROOT)
    assert errors and "not in tests/clients/meson.build" in errors[0]
    assert m.on_meson("clients:lua_report") and m.needs_lua_module("clients:lua_report")


def test_a_mutation_that_no_longer_applies_is_an_error(tmp_path):
    m = _mutants()
    mut = {"name": "x", "edit": [{"file": "core/src/gc/cycle.c", "old": "no such text anywhere",
                                  "new": "y"}]}
    errors = m.check_applies(mut, ROOT)
    assert errors and "occurs 0 times" in errors[0] and "moved" in errors[0]
    mut["edit"][0]["old"] = "{"  # more than once: ambiguous
    assert "times, not once" in m.check_applies(mut, ROOT)[0]


def test_a_timed_out_test_leaves_no_process_behind(tmp_path):
    # meson test runs each test in a session of its own: killing meson's
    # process group on the mutant's timeout left the test running -- a
    # mutant whose test loops forever (eagain-retry-unbounded) kept a CPU
    # busy for the rest of the machine's life.  Every process the command
    # started goes with it.
    m = _mutants()
    pidfile = tmp_path / "pid"
    script = ("import subprocess, sys, time\n"
              "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'],"
              " start_new_session=True)\n"
              f"open({str(pidfile)!r}, 'w').write(str(c.pid))\n"
              "time.sleep(600)\n")
    # (1.5 s: the two interpreters start, the pid is written, in a fraction of it)
    rc, secs = m.run([sys.executable, "-c", script], str(tmp_path), timeout=1.5)
    assert rc == "timeout"
    pid = int(pidfile.read_text())
    for _ in range(100):  # SIGKILL is delivered at once; the zombie is reaped by init
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return
        if state == "Z":
            return
        time.sleep(0.05)
    os.kill(pid, 9)
    raise AssertionError(f"the command's child {pid} (its own session) still runs after the timeout")


def test_the_scratch_package_carries_its_entry_points(tmp_path):
    # the scratch copy's package is put on PYTHONPATH, not installed: in a fresh
    # clone's venv (no heaplab installed) the pytest plugin's entry point was
    # nowhere, and `make mutants`' baseline failed on every test that runs an
    # inner pytest session ("fixture 'lab' not found") -- the metadata beside
    # the package makes it a distribution of its own
    m = _mutants()
    s = m.Scratch.__new__(m.Scratch)
    s.path = ROOT
    s.dist_info(str(tmp_path))
    # -S: no site-packages, so only what PYTHONPATH holds is found
    p = subprocess.run([sys.executable, "-S", "-c",
                        "import importlib.metadata as m; d = m.distribution('heaplab'); "
                        "print(d.version, sorted((e.group, e.name, e.value) for e in d.entry_points))"],
                       env=dict(os.environ, PYTHONPATH=str(tmp_path)), capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "('pytest11', 'heaplab', 'heaplab.pytest_plugin')" in p.stdout, p.stdout
    assert "('console_scripts', 'heaplab', 'heaplab.__main__:main')" in p.stdout, p.stdout
    assert p.stdout.split()[0] == "0.1.0", p.stdout
