"""The option and injection contract lives in the C library: Python and Lua
only say what type a value has, and every message -- unknown option, wrong
type, out of range, a bad fault site or errno -- is the library's, the same
words in both languages (issue 15).  Lua runs as the real lua5.4 with the
module of the build (HEAPLAB_BUILD, default ./build)."""
import os
import shutil
import subprocess

import pytest

import heaplab

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("HEAPLAB_BUILD", os.path.join(ROOT, "build"))
MODULE = os.path.join(BUILD, "bindings", "lua", "heaplab.so")

# (Python keyword arguments, the same as a Lua table constructor)
OPTION_CASES = [
    (dict(warm_page=64), "{ warm_page = 64 }"),
    (dict(sweep=1), "{ sweep = 1 }"),
    (dict(page_release=2), "{ page_release = 2 }"),
    (dict(page_release="maybe"), "{ page_release = 'maybe' }"),
    (dict(warm_pages=-1), "{ warm_pages = -1 }"),
    (dict(warm_pages=1.5), "{ warm_pages = 1.5 }"),
    (dict(warm_pages=True), "{ warm_pages = true }"),
    (dict(reuse_failed_order="sideways"), "{ reuse_failed_order = 'sideways' }"),
    (dict(reserve_bytes="12q"), "{ reserve_bytes = '12q' }"),
    (dict(reserve_bytes="16\x00junk"), "{ reserve_bytes = '16\\0junk' }"),
    (dict(page_size=12288), "{ page_size = 12288 }"),
]

INJECT_CASES = [
    (("nowhere", "always"), "'nowhere', 'always'"),
    (("release", "sometimes"), "'release', 'sometimes'"),
    (("release", "always", 0, "EWHAT"), "'release', 'always', 0, 'EWHAT'"),
    (("release", "always", 0, -3), "'release', 'always', 0, -3"),
    (("release", "every", 0), "'release', 'every', 0"),
]


def lua_message(chunk):
    lua = shutil.which("lua5.4")
    if not lua or not os.path.exists(MODULE):
        pytest.fail(f"needs lua5.4 and the Lua module at {MODULE} (make build)")
    code = ("local hl = require 'heaplab'\n"
            f"local ok, err = pcall(function() {chunk} end)\n"
            "assert(not ok, 'no error')\n"
            "io.write(tostring(err))\n")
    env = dict(os.environ, LUA_CPATH=os.path.join(os.path.dirname(MODULE), "?.so") + ";;")
    p = subprocess.run([lua, "-e", code], capture_output=True, text=True, env=env, timeout=60)
    assert p.returncode == 0, p.stderr
    return p.stdout


def library_words(lua_error):
    """The library's message inside a Lua error: after 'fn: ', before ' (ECODE)'."""
    msg = lua_error.split(": ", 2)[-1] if lua_error.count(": ") >= 2 else lua_error
    return msg.rsplit(" (", 1)[0] if msg.endswith(")") and " (E" in msg else msg


@pytest.mark.parametrize("kwargs,table", OPTION_CASES, ids=[c[1] for c in OPTION_CASES])
def test_option_errors_are_the_same_words(kwargs, table):
    with pytest.raises(heaplab.Error) as e:
        heaplab.Heap(**kwargs)
    words = str(e.value)
    assert list(kwargs)[0] in words
    assert words in lua_message(f"hl.heap{table}")


@pytest.mark.parametrize("args,lua_args", INJECT_CASES, ids=[c[1] for c in INJECT_CASES])
def test_inject_errors_are_the_same_words(args, lua_args):
    with heaplab.Heap() as h:
        with pytest.raises(heaplab.Error) as e:
            h.inject(*args)
    words = str(e.value)
    lua = lua_message(f"local h = hl.heap{{}}; h:inject({lua_args})")
    # Lua says the method once ("h:inject: unknown site ..."), C says "inject: ..."
    assert words.split(": ", 1)[1] in lua


def test_sampler_errors_are_the_same_words():
    with pytest.raises(ValueError) as e:
        heaplab.Sampler(50)
    assert str(e.value) in lua_message("hl.sampler(50)")


def test_enum_options_are_names_everywhere():
    with heaplab.Heap(reuse_failed_order="lifo") as h:
        assert h.options["reuse_failed_order"] == "lifo"
    assert heaplab.options()["sweep"]["choices"] == ["retired", "full"]
    out = lua_message("local h = hl.heap{ reuse_failed_order = 'lifo' }; "
                      "error(h:options().reuse_failed_order .. ' ' .. "
                      "table.concat(hl.options().sweep.choices, ','))")
    assert out.endswith("lifo retired,full")


def test_explicit_option_overrides_a_bad_environment(monkeypatch):
    monkeypatch.setenv("HEAPLAB_WARM_PAGES", "lots")
    with pytest.raises(ValueError, match="HEAPLAB_WARM_PAGES"):
        heaplab.Heap()
    with heaplab.Heap(warm_pages=3) as h:
        assert h.options["warm_pages"] == 3


def test_version_is_the_projects():
    import re
    meson = open(os.path.join(ROOT, "meson.build")).read()
    declared = re.search(r"version\s*:\s*'([^']+)'", meson).group(1)
    assert heaplab.__version__ == declared
    from importlib.metadata import version
    assert version("heaplab") == declared
