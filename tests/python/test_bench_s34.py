"""bench-heaplab's options: -o first, then the environment for the options
-o does not name, as the bindings do (hl_options_from_env_except).  It read
the environment first, so a pair the environment alone made invalid was
refused before -o could make it valid (the thirty-third note, confirmed in
the thirty-fourth session)."""
import json
import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("HEAPLAB_BUILD") or os.path.join(ROOT, "build")
EXE = os.path.join(BUILD, "experiments", "bench", "bench-heaplab")

pytestmark = pytest.mark.shares_the_machine


def record(*args, **env):
    if not os.path.exists(EXE):
        pytest.skip(f"{EXE} not built")
    p = subprocess.run([EXE, "churn", "--rounds", "1", "--bytes", "8m", *args],
                       capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **env))
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_an_explicit_option_makes_the_environments_pair_valid():
    r = record("-o", "young_bytes=8m", HEAPLAB_GENERATIONAL="1", HEAPLAB_YOUNG_BYTES="4m",
               HEAPLAB_YOUNG_MIN_BYTES="6m")
    assert r["error"] is None, r["error"]


def test_the_environment_still_fills_what_o_does_not_name():
    # (-o young_min_bytes=6m beside HEAPLAB_YOUNG_BYTES=4m: the environment's
    # young_bytes is read, and the pair is refused naming the variable)
    r = record("-o", "young_min_bytes=6m", HEAPLAB_GENERATIONAL="1", HEAPLAB_YOUNG_BYTES="4m")
    assert r["error"] and "HEAPLAB_YOUNG_BYTES=4m" in r["error"], r["error"]


def test_an_explicit_option_wins_over_its_variable():
    r = record("-o", "page_release=1", HEAPLAB_PAGE_RELEASE="0")
    assert r["error"] is None and r["notes"]["page_release"] == 1, r
