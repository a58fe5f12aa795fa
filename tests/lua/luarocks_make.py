"""`luarocks make` builds and installs the Lua module from a checkout, against
the system's Lua 5.4, into a temporary tree; `lua5.4 -e 'require "heaplab"'`
then loads it from that tree (issue 21; docs/lua.md, "Install with LuaRocks").

    python3 tests/lua/luarocks_make.py SOURCE_ROOT LUAROCKS LUA

The checkout's tracked files (or, without git, the tree less its build
directories) are copied to a scratch directory first, and `luarocks make` runs
there as a user runs it in a checkout; afterwards the copy may hold nothing
new outside build-luarocks/ (LuaRocks' builtin backend used to leave heaplab.so
and its objects at the top, and Python, run from there, imported that
heaplab.so as the heaplab package), and `python -c 'import heaplab'` from its
top must import the Python package.  Also checks that the module exports
luaopen_heaplab only (as the Meson build's), that the rockspec's version is
the project's (meson.build, heaplab._VERSION) and that its C sources (listed in
the rockspec or in the makefile it names) are exactly the ones Meson builds the
module from, so the hand list cannot drift from the build.
"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile


def tracked_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-z", "--cached", "--others",
                              "--exclude-standard"], capture_output=True,
                             check=True).stdout
        return [p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not (x.startswith("build") or x.startswith("."))]
            files += [os.path.relpath(os.path.join(d, n), root) for n in names]
        return files


def files_under(top):
    for d, dirs, names in os.walk(top):
        for n in names:
            yield os.path.relpath(os.path.join(d, n), top)


def meson_sources(root):
    """The module's C files as Meson builds them: bindings/lua/meson.build's
    shared_module sources and core/meson.build's core_sources (Linux)."""
    with open(os.path.join(root, "bindings", "lua", "meson.build")) as f:
        m = re.search(r"shared_module\('heaplab',\s*(.*?)name_prefix", f.read(), re.S)
    binding = ["bindings/lua/" + s for s in re.findall(r"'([\w/]+\.c)'", m.group(1))]
    with open(os.path.join(root, "core", "meson.build")) as f:
        text = f.read()
    m = re.search(r"core_sources = files\((.*?)\)", text, re.S)
    core = ["core/" + s for s in re.findall(r"'([\w/]+\.c)'", m.group(1))]
    linux = re.search(r"'(src/prim/prim_linux\.c)'", text).group(1)
    return sorted(binding + core + ["core/" + linux])


def main(root, luarocks, lua):
    rockspecs = glob.glob(os.path.join(root, "heaplab-*.rockspec"))
    assert len(rockspecs) == 1, f"one heaplab-*.rockspec at the top of the tree, found {rockspecs}"
    spec = os.path.basename(rockspecs[0])
    with open(rockspecs[0]) as f:
        spec_text = f.read()
    makefile = re.search(r'^\s*makefile\s*=\s*"([^"]+)"', spec_text, re.M)
    if makefile:  # build.type "make": the sources and the defines are the makefile's
        with open(os.path.join(root, makefile.group(1))) as f:
            spec_text += f.read()
    with open(os.path.join(root, "meson.build")) as f:
        project_version = re.search(r"version\s*:\s*'([^']+)'", f.read()).group(1)
    rock_version = re.search(r'^version = "([^"]+)-\d+"', spec_text, re.M).group(1)
    assert rock_version == project_version, \
        f"{spec}: version {rock_version}, meson.build says {project_version}"
    numbers = dict(re.findall(r'HL_VERSION_(MAJOR|MINOR|PATCH)=(\d+)\b', spec_text))
    spec_version = ".".join(numbers.get(k, "?") for k in ("MAJOR", "MINOR", "PATCH"))
    assert spec_version == project_version, \
        f"{spec}: defines version {spec_version}, meson.build says {project_version}"
    listed = sorted(re.findall(r'\b((?:bindings|core)/[\w/]+\.c)\b', spec_text))
    built = meson_sources(root)
    assert listed == built, (f"{spec} lists other C sources than Meson builds the module from:\n"
                             f"  only in the rockspec: {sorted(set(listed) - set(built))}\n"
                             f"  only in meson.build:  {sorted(set(built) - set(listed))}")

    with tempfile.TemporaryDirectory() as d:
        src, tree = os.path.join(d, "src"), os.path.join(d, "tree")
        for rel in tracked_files(root):
            dst = os.path.join(src, rel)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.isfile(os.path.join(root, rel)):
                shutil.copy2(os.path.join(root, rel), dst)
        before = set(files_under(src))
        base = [luarocks, "--lua-version=5.4", f"--tree={tree}"]
        p = subprocess.run(base + ["make", spec], cwd=src, capture_output=True, text=True,
                           timeout=600)
        assert p.returncode == 0, f"luarocks make failed ({p.returncode}):\n{p.stdout}{p.stderr}"
        print(p.stdout.strip().splitlines()[-1])
        so = os.path.join(tree, "lib", "lua", "5.4", "heaplab.so")
        assert os.path.isfile(so), f"luarocks make installed no {so}"

        # nothing left in the checkout but build-luarocks/: no heaplab.so, no
        # objects beside the sources
        stray = sorted(f for f in set(files_under(src)) - before
                       if not f.startswith("build-luarocks" + os.sep))
        assert not stray, ("luarocks make left files in the checkout outside build-luarocks/: "
                           f"{stray[:8]}{' ...' if len(stray) > 8 else ''} ({len(stray)})")
        # Python run from the top of the checkout imports the heaplab package
        # (a stand-in on PYTHONPATH: '' comes before it on sys.path), not a
        # heaplab.so there
        pkg = os.path.join(d, "pythonpath", "heaplab")
        os.makedirs(pkg)
        with open(os.path.join(pkg, "__init__.py"), "w") as f:
            f.write("")
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = os.path.dirname(pkg)
        p = subprocess.run([sys.executable, "-c", "import heaplab; print(heaplab.__file__)"],
                           cwd=src, env=env, capture_output=True, text=True, timeout=60)
        assert p.returncode == 0 and p.stdout.strip() == os.path.join(pkg, "__init__.py"), \
            (f"python -c 'import heaplab' at the top of the checkout after luarocks make "
             f"imported {p.stdout.strip() or 'nothing'}, not the package "
             f"{os.path.join(pkg, '__init__.py')}: {p.stderr.strip()[-300:]}")

        # the module exports luaopen_heaplab only, as the Meson build's does
        # (bindings/lua/heaplab_lua.map)
        nm = shutil.which("nm")
        if nm:
            out = subprocess.run([nm, "-D", "--defined-only", so], capture_output=True,
                                 text=True, check=True).stdout
            exported = sorted(line.split()[-1] for line in out.splitlines()
                              if line.split()[-2:-1] and line.split()[-2] in "TDBRW")
            assert exported == ["luaopen_heaplab"], \
                f"{so} exports {exported[:8]} ({len(exported)}), not luaopen_heaplab only"
        cpath = subprocess.run(base + ["path", "--lr-cpath"], capture_output=True, text=True,
                               check=True).stdout.strip()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("LUA_", "HEAPLAB_"))}
        env["LUA_CPATH"] = cpath + ";;"
        env["MALLOC_PERTURB_"] = "0"
        code = ('local hl = require "heaplab" '
                'print(hl._VERSION, package.searchpath("heaplab", package.cpath)) '
                'local h = assert(hl.heap{}) local r = assert(h:fill(8 << 20, 256)) '
                'r:release() assert(h:collect{cycles = 2}) print(h:stats().released_pages)')
        p = subprocess.run([lua, "-e", code], cwd=d, env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, f"lua5.4 -e 'require \"heaplab\"' from the tree: {p.stderr}"
        version, path = p.stdout.splitlines()[0].split("\t")
        assert version == f"heaplab {project_version}", p.stdout
        assert os.path.realpath(path) == os.path.realpath(so), f"loaded {path}, not {so}"
        assert int(p.stdout.splitlines()[1]) > 0, p.stdout
        print(f"lua5.4 loaded {version} from the luarocks tree: {path}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        print(f"usage: {sys.argv[0]} SOURCE_ROOT LUAROCKS LUA", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
