"""The Lua module's reference builds (`make docs`: ldoc --fatalwarnings over
config.ld) and documents every function the module registers: the module
table's, and each method of a heap, an object, a sampler and a region.

    python3 tests/lua/ldoc_reference.py SOURCE_ROOT LDOC
"""
import os
import re
import subprocess
import sys
import tempfile

TABLES = {  # luaL_Reg table -> how LDoc names its entries
    "module_functions": "{}", "heap_methods": "heap:{}", "obj_methods": "object:{}",
    "sampler_methods": "sampler:{}", "region_methods": "region:{}",
}


def registered(root):
    names = set()
    for f in ("heaplab_lua.c", "heap.c", "object.c", "sampler.c", "region.c"):
        with open(os.path.join(root, "bindings", "lua", f)) as fh:
            text = fh.read()
        for table, form in TABLES.items():
            m = re.search(r"luaL_Reg " + table + r"\[\] = \{(.*?)\{NULL, NULL\}", text, re.S)
            if m:
                names |= {form.format(n) for n in re.findall(r'\{"(\w+)",', m.group(1))}
    return names


def main(root, ldoc):
    want = registered(root)
    assert len(want) > 40, f"found only {len(want)} registered functions: {sorted(want)}"
    with tempfile.TemporaryDirectory() as d:
        p = subprocess.run([ldoc, "--fatalwarnings", "-d", d, "."], cwd=root,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, f"ldoc failed ({p.returncode}):\n{p.stdout}{p.stderr}"
        with open(os.path.join(d, "index.html")) as f:
            page = f.read()
    documented = set(re.findall(r'<a name = "([\w:]+)"></a>', page))
    missing = sorted(want - documented)
    assert not missing, f"registered but not documented in the reference: {missing}"
    print(f"ldoc: {len(want)} registered functions, all documented")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(f"usage: {sys.argv[0]} SOURCE_ROOT LDOC", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(*sys.argv[1:]))
