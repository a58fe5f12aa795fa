"""The documentation names what the code has.

docs/design.md described the write barrier's test as a page flag PF_OLD,
which does not exist (the barrier tests a bit of the object's header,
HL_HDR_OLD), and pinned_objects' description (heaplab.h) left out the
objects that hold a root region's words, which compaction pins and counts
(the moving collector hunt, session 30)."""
import glob
import os
import re

import heaplab
from heaplab._heaplab import ffi, lib

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# the core's internal flags and states, as the docs name them in backquotes
INTERNAL = re.compile(r"`((?:PF|TN|SUB|PS|HL_HDR)_[A-Z0-9_]+)`")


def _core_text():
    files = glob.glob(os.path.join(ROOT, "core", "**", "*.[ch]"), recursive=True)
    return "\n".join(open(f, encoding="utf-8").read() for f in files)


def test_internal_names_in_the_docs_are_the_cores():
    core = _core_text()
    missing = []
    for doc in sorted(glob.glob(os.path.join(ROOT, "docs", "*.md"))):
        text = open(doc, encoding="utf-8").read()
        for m in INTERNAL.finditer(text):
            name = m.group(1)
            if not re.search(r"\b" + re.escape(name) + r"\b", core):
                line = text.count("\n", 0, m.start()) + 1
                missing.append(f"{os.path.relpath(doc, ROOT)}:{line}: {name}")
    assert not missing, "names the core does not have:\n" + "\n".join(missing)


def test_pinned_objects_description_names_every_kind_of_pinned_object():
    i = heaplab.stat_names().index("pinned_objects")
    desc = ffi.string(lib.hl_stat_description(i)).decode()
    for kind in ("conservative root", "root region's words", "held (hl_enter)"):
        assert kind in desc, f"pinned_objects' description does not name {kind!r}: {desc}"
