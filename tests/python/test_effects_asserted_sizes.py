"""The effects table's "asserted" column states the sizes the experiment
asserted against -- the sizes it ran with (HEAPLAB_E1_TEXTURES_MIB, HEAPLAB_E7_STRUCT_MIB) -- not the defaults
(session 20's hunt: E1 said ">= 95% of 192 MiB" and E7 ">= 64 MiB kept"
while checking 32 and 8 MiB).  Runs E1 and E7 at small sizes (seconds)."""
import json
import os
import subprocess
import sys

from procs import PYTEST

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_asserted_sizes_are_the_sizes_run(tmp_path):
    env = dict(os.environ, HEAPLAB_RESULTS=str(tmp_path), HEAPLAB_E1_FILL_MIB="16",
               HEAPLAB_E1_TEXTURES_MIB="12", HEAPLAB_E7_STRUCT_MIB="8")
    p = subprocess.run([*PYTEST, "-q", "-p", "no:cacheprovider",
                        "experiments/test_e1_page_floor.py", "experiments/test_e7_stale_roots.py"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    with open(tmp_path / "effects.json") as f:
        effects = json.load(f)["effects"]
    asserted = {(e["experiment"], e["arm"], e["what"]): e["asserted"] for e in effects}
    assert asserted[("E1", "off", "textures cost")] == ">= 95% of 12 MiB", asserted
    assert asserted[("E7", "stale", "returned at drop")] == "<= 5%, every object kept (>= 8 MiB)", asserted
    assert asserted[("E7", "noise", "64 object words kept")] == "64 objects, their pages"
