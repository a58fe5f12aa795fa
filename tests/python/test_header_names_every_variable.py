"""heaplab.h says which environment variables the library reads, and when
(its conventions: "The environment").  HEAPLAB_COUNTERS_FILE, which every
hl_heap_new reads whatever its options, was named only in
docs/experiments/e6.md (the embedding hunt, session 28).  This reads the core's
sources: every variable they read -- a getenv of a literal, or a prefix walked
over environ -- must be named in the header."""
import os
import re

import pytest

# reads sources only: nothing depends on the machine's load
pytestmark = pytest.mark.shares_the_machine

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORE = os.path.join(ROOT, "core", "src")
HEADER = os.path.join(ROOT, "core", "include", "heaplab.h")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def variables_read():
    found = set()
    for dirpath, _, files in os.walk(CORE):
        for name in files:
            if not name.endswith((".c", ".h")):
                continue
            with open(os.path.join(dirpath, name)) as f:
                code = strip_comments(f.read())
            # a variable read by name: libc's getenv or the core's own walk
            # of environ (prim.h's hl__prim_env, which calls nothing of libc)
            by_name = r'(?:\bgetenv|\bhl__prim_env)\(\s*"([A-Z0-9_]+)"'
            found.update(re.findall(by_name, code))
            code = re.sub(by_name, "", code)
            # environ walks: the prefixes they match ("HEAPLAB_FAULT_", "HEAPLAB_")
            if "environ" in code:
                found.update(p + "<" for p in re.findall(r'"(HEAPLAB_[A-Z_]*)"', code))
    return found


def test_every_variable_the_core_reads_is_in_the_header():
    with open(HEADER) as f:
        header = f.read()
    found = variables_read()
    assert "HEAPLAB_COUNTERS_FILE" in found and "HEAPLAB_FAULT_<" in found, found
    missing = sorted(v for v in found if v not in header)
    assert not missing, f"read by core/src but not named in heaplab.h: {missing}"
    # and the header says when: the calls that read them
    for var, when in (("HEAPLAB_COUNTERS_FILE", "first hl_heap_new"),
                      ("HEAPLAB_FAULT_<SITE>", "WHATEVER opts is"),
                      ("HEAPLAB_<OPTION>", "never by hl_heap_new given opts")):
        spots = [m.start() for m in re.finditer(re.escape(var), header)]
        assert any(when in header[at:at + 700] for at in spots), (var, when)
