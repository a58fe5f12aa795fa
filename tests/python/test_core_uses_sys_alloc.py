"""Every byte the core takes from the C library goes through hl__sys_malloc & co
(core/src/internal.h): in libheaplab-malloc.so the core *is* malloc, and a plain
malloc() call from inside it recurses into the heap being set up or locked.  A
merge of the sub-page release once brought raw calls back (subpage.c, evacuate.c,
thin.c); this test reads the sources so it cannot happen silently again."""
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORE = os.path.join(ROOT, "core", "src")
RAW = re.compile(r"(?<![\w.>])(malloc|calloc|realloc|free|strdup|strndup|posix_memalign|aligned_alloc)\s*\(")


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def test_core_calls_no_raw_libc_allocator():
    found = []
    for dirpath, _, files in os.walk(CORE):
        for name in files:
            if not name.endswith((".c", ".h")):
                continue
            path = os.path.join(dirpath, name)
            with open(path) as f:
                text = strip_comments(f.read())
            for lineno, line in enumerate(text.splitlines(), 1):
                if line.lstrip().startswith("#"):
                    continue  # the hl__sys_* definitions themselves
                for m in RAW.finditer(line):
                    found.append(f"{os.path.relpath(path, ROOT)}:{lineno}: {m.group(1)}()")
    assert not found, "raw C library allocator calls in the core (use hl__sys_*):\n" + "\n".join(found)
