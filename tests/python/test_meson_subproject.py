"""heaplab as a Meson subproject of someone's C program (docs/clients.md,
"Embedding libheaplab in a C program"): dependency('heaplab') finds it
(meson.override_dependency), and only the core library is built -- no Lua
module, launchers, preload library, benchmarks or tests, which a parent
project neither wants nor has the dependencies of (the embedding hunt,
session 28: none of that was so).  A tiny parent project in a temporary
folder, heaplab under its subprojects/ (a symbolic link to this tree)."""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

# builds the core once (about 30 s on 2 cores); no assertion on the load
pytestmark = pytest.mark.shares_the_machine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.dirname(sys.executable)


def tool(name):
    path = os.path.join(BIN, name)
    return path if os.path.exists(path) else shutil.which(name)


@pytest.mark.skipif(not tool("meson") or not tool("ninja"), reason="needs meson and ninja")
def test_a_parent_project_gets_the_core_library_alone(tmp_path):
    parent = tmp_path / "parent"
    (parent / "subprojects").mkdir(parents=True)
    os.symlink(ROOT, parent / "subprojects" / "heaplab")
    (parent / "meson.build").write_text(textwrap.dedent("""\
        project('parent', 'c', default_options : ['c_std=c99'])
        subproject('heaplab')
        executable('app', 'app.c', dependencies : dependency('heaplab'))
        """))
    (parent / "app.c").write_text(textwrap.dedent("""\
        #include <heaplab.h>
        #include <stdio.h>
        int main(void) {
          hl_heap *h;
          char err[256];
          if (hl_heap_new(NULL, &h, err, sizeof err)) { puts(err); return 1; }
          hl_ref r;
          int rc = hl_alloc(h, 64, 1, &r);
          printf("abi %d %d rc %d\\n", hl_abi_version(), HL_ABI_VERSION, rc);
          hl_heap_free(h);
          return rc;
        }
        """))
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    for k in [k for k in env if k.startswith("HEAPLAB_")]:
        del env[k]
    build = parent / "build"
    p = subprocess.run([tool("meson"), "setup", str(build)], cwd=parent, env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    # nothing of heaplab's own looked for: Lua, Python, Boehm GC, mimalloc...
    for absent in ("lua", "bdw-gc", "mimalloc", "jemalloc", "readline", "Run-time dependency python"):
        assert absent not in p.stdout, f"the subproject looked for {absent}:\n{p.stdout}"
    targets = json.loads(subprocess.run([tool("meson"), "introspect", "--targets", str(build)],
                                        env=env, capture_output=True, text=True,
                                        check=True).stdout)
    built = sorted(t["name"] for t in targets if t.get("build_by_default"))
    assert built == ["app", "heaplab"], built
    p = subprocess.run([tool("ninja"), "-C", str(build)], env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    p = subprocess.run([str(build / "app")], env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr
    abi = p.stdout.split()
    assert abi[0] == "abi" and abi[1] == abi[2] and abi[4] == "0", p.stdout
