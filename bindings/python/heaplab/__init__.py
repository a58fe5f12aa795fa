"""heaplab: a garbage-collected heap and page allocator for memory experiments.

A thin layer over libheaplab (CFFI, API mode).  Option names, stats, event
fields and fault sites all come from the C declarations in heaplab.h; no
policy lives here.

    import heaplab
    with heaplab.Heap(page_release=True, warm_pages=64) as h:
        r = h.fill(192 << 20, 256)      # 192 MiB of 256-byte objects
        r.release()
        h.collect(cycles=2)
        print(h.stats().released_pages, heaplab.footprint().phys_footprint)
"""
from __future__ import annotations

import collections
import inspect
import itertools
import numbers
import operator
import os
import re
import signal
import sys
import threading
import weakref
from typing import (TYPE_CHECKING, Any, Dict, Iterable, Iterator, List, Mapping, NoReturn,
                    Optional, Tuple, TypeVar, Union)

from ._heaplab import ffi, lib
from ._options import OPTION_TABLE, HeapOptions

if TYPE_CHECKING:
    if sys.version_info >= (3, 11):
        from typing import Unpack
    else:
        from typing_extensions import Unpack

__all__ = [
    "Heap", "HeapOptions", "Ref", "ConservativeRegion", "Stats", "Event", "Footprint", "ChurnResult", "Sampler",
    "Error", "HeapClosed", "StaleRef", "OutOfMemory", "ModeError", "InvalidArgument",
    "SlotIndexError", "UnknownOption", "CheckFailed", "InvalidType", "Interrupted",
    "NotInitialised",
    "footprint", "options", "stat_names", "fault_sites", "fault_modes",
    "MAX_SIZE", "MAX_REFS", "__version__", "preload_path",
]

__version__: str = ffi.string(lib.hl_version()).decode()
#: the largest payload of one object, bytes
MAX_SIZE: int = int(lib.hl_max_size())
#: the most reference slots one object can have
MAX_REFS: int = int(lib.hl_max_refs())


# ---- exceptions: one mapping from C error codes -------------------------------

class Error(Exception):
    """Any failure reported by libheaplab.  `code` is the C error name."""

    code = "ERROR"


class HeapClosed(Error):
    """The heap was closed; its handles are gone."""

    code = "ECLOSED"


class StaleRef(Error):
    """The Ref was released, or the ConservativeRegion was removed -- by the
    program, or by a garbage collection that finalized it (a finalizer of the
    same garbage used it afterwards); the message says which."""

    code = "ESTALE"


class OutOfMemory(Error, MemoryError):
    """The heap could not get the memory it needed (reservation full, limit hit)."""

    code = "ENOMEM"


class ModeError(Error):
    """The operation needs the other heap mode (collected or manual)."""

    code = "EMODE"


class InvalidArgument(Error, ValueError):
    """A value out of range (an option, a size, an index base...); a ValueError.
    Its `code` is the C error's: EINVAL, EVALUE (an option's value) or
    EFOREIGN (another heap's handle)."""

    code = "EINVAL"


class SlotIndexError(Error, IndexError):
    """A slot index outside the object's slots; an IndexError."""

    code = "ERANGE"


class UnknownOption(Error, TypeError):
    """Heap() got an option name that is not in the option table; a TypeError."""

    code = "EOPTION"


class CheckFailed(Error):
    """A heap invariant does not hold (hl_heap_check)."""

    code = "ECHECK"


class InvalidType(Error, TypeError):
    """A value of the wrong type (a number for an enum option...)."""

    code = "ETYPE"


class Interrupted(Error, KeyboardInterrupt):
    """A long call (fill, churn, collect, checksum) stopped at a safe point
    because SIGINT arrived; raised only where CPython's own KeyboardInterrupt
    is not (a SIGINT handler of the program's that does not raise)."""

    code = "EINTR"


class NotInitialised(Error, TypeError):
    """An object whose __init__ did not run: a subclass's __init__ that does
    not call super().__init__(), a Ref made with Ref.__new__; a TypeError."""


# ---- objects whose __init__ did not run --------------------------------------------
# The classes keep their state in __slots__: a slot that __init__ never set
# raised a bare AttributeError ('H' object has no attribute '_closed') from
# any method, repr included.  One mechanism for every class: a slot of a
# heaplab class that is not set is an object that was not initialised.

class _Slotted:
    __slots__ = ()
    #: how a proper object is made, for the message; None: by its __init__
    _made_by: Optional[str] = None

    @classmethod
    def _own_slots(cls) -> Tuple[str, ...]:
        """The slots of the heaplab classes cls derives from."""
        return tuple(n for k in cls.__mro__ if k.__module__ == __name__
                     for n in k.__dict__.get("__slots__", ()) if n != "__weakref__")

    def _has(self, name: str) -> bool:
        try:
            object.__getattribute__(self, name)
            return True
        except AttributeError:
            return False

    def _initialised(self) -> bool:
        return all(self._has(n) for n in self._own_slots())

    @classmethod
    def _base(cls) -> type:
        """The heaplab class cls is (or derives from)."""
        return next(k for k in cls.__mro__ if k.__module__ == __name__)

    def _not_initialised(self) -> NotInitialised:
        cls, base = type(self), self._base()
        if self._made_by:
            return NotInitialised(f"this heaplab.{base.__name__} was not made by a heap (a "
                                  f"{base.__name__} is made by {self._made_by}): it has no state")
        how = (f"{cls.__name__}.__init__ did not call heaplab.{base.__name__}.__init__, or that "
               f"failed" if cls is not base else "its __init__ did not run, or failed")
        return NotInitialised(f"this heaplab.{base.__name__} was not initialised ({how})")

    def _missing(self, name: str) -> NoReturn:
        """The ordinary lookup of `name` failed: a slot never set, or no such name."""
        if name in self._own_slots():
            raise self._not_initialised()
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    if not TYPE_CHECKING:   # (to mypy, a class with __getattr__ has every attribute)
        def __getattr__(self, name: str) -> Any:
            self._missing(name)

    def __repr__(self) -> str:
        if not self._initialised():
            return f"<heaplab.{self._base().__name__} not initialised>"
        return self._repr()

    def _repr(self) -> str:
        return object.__repr__(self)


_ERRORS = {
    lib.HL_EINVAL: InvalidArgument,
    lib.HL_ENOMEM: OutOfMemory,
    lib.HL_ERANGE: SlotIndexError,
    lib.HL_ESTALE: StaleRef,
    lib.HL_EFOREIGN: InvalidArgument,
    lib.HL_ECLOSED: HeapClosed,
    lib.HL_EOPTION: UnknownOption,
    lib.HL_EVALUE: InvalidArgument,
    lib.HL_EMODE: ModeError,
    lib.HL_ECHECK: CheckFailed,
    lib.HL_ETYPE: InvalidType,
    lib.HL_EINTR: Interrupted,
}

# Ctrl-C stops the long C calls at a safe point (hl_interrupt_attach puts a
# handler in front of CPython's, which still runs and raises KeyboardInterrupt
# as the call returns).  Only when SIGINT has CPython's default handler: a
# program's own handler is left alone.  A signal.signal(SIGINT, ...) later
# replaces the chain; the calls then finish before the handler runs, as usual.
if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    lib.hl_interrupt_attach(signal.SIGINT)


def _sigint_put_back(handler: Any) -> None:
    """Put SIGINT's Python handler back after heaplab swapped it for a while
    (the harness's and the sweeps' Ctrl-C deferrals) -- and, when it is
    CPython's default, heaplab's handler in front of it again: signal.signal
    replaced the chain, and after any harness run Ctrl-C no longer stopped a
    long fill at once (the review, session 26).  Main thread only."""
    signal.signal(signal.SIGINT, handler)
    if handler is signal.default_int_handler:
        lib.hl_interrupt_attach(signal.SIGINT)


# the C calls a library message may point a caller to, as Python calls them
# (the Lua module says them in Lua's names: bindings/lua/args.c)
_PYTHON_NAMES = (("hl_trim", "trim()"),)


def _said_in_python(message: Optional[str]) -> Optional[str]:
    """A library message in Python's names: a C function's name it starts
    with dropped ("hl_roots_add: root regions need a collected heap" to
    Heap.conservative_region's caller), and the C call it points to said as
    Python calls it ("use hl_trim" to Heap.collect's: "use trim()")."""
    if not message:
        return message
    message = re.sub(r"\Ahl_[a-z0-9_]*: ", "", message)
    for c, py in _PYTHON_NAMES:
        message = re.sub(rf"\b{c}\b", py, message)
    return message


def _raise(rc: int, message: Optional[str]) -> NoReturn:
    cls = _ERRORS.get(rc, Error)
    exc = cls(_said_in_python(message))
    # the C error's own name: one class can stand for several (InvalidArgument
    # for EINVAL, EVALUE and EFOREIGN), and its default code named only the first
    exc.code = ffi.string(lib.hl_error_name(rc)).decode()
    raise exc


def _foreign(message: str) -> InvalidArgument:
    """Another heap's Ref, caught before C sees it: C's HL_EFOREIGN."""
    exc = InvalidArgument(message)
    exc.code = "EFOREIGN"
    return exc


def _s(p: Any) -> Optional[str]:
    # (a message may quote bytes of a bad name that are not UTF-8: a name
    # given with surrogates raised UnicodeDecodeError here, not the error)
    return ffi.string(p).decode("utf-8", "backslashreplace") if p != ffi.NULL else None


def _cstr(what: str, text: str) -> bytes:
    """A str for a C string argument: C would read a NUL inside it as its
    end ('warm_pages\\0junk' was warm_pages), so it is refused."""
    if "\0" in text:
        raise InvalidArgument(f"{what} {text!r} contains a NUL byte")
    return text.encode("utf-8", "surrogateescape")


# ---- declarations read from C --------------------------------------------------

_KINDS = {lib.HL_OPT_BOOL: "bool", lib.HL_OPT_INT: "int", lib.HL_OPT_BYTES: "bytes",
          lib.HL_OPT_ENUM: "enum"}


def _option_table():
    table = {}
    info = ffi.new("hl_option_info *")
    for i in range(lib.hl_option_count()):
        lib.hl_option_info_get(i, info)
        kind = _KINDS[info.kind]
        choices = ([_s(lib.hl_option_choice(i, k)) for k in range(info.min, info.max + 1)]
                   if kind == "enum" else None)
        default = getattr(info, "def")
        table[_s(info.name)] = {
            "kind": kind,
            "default": (_s(lib.hl_option_choice(i, default)) if choices else
                        bool(default) if kind == "bool" else default),
            "min": info.min,
            "max": info.max,
            "choices": choices,
            "collected_only": bool(info.collected_only),
            "description": _s(info.description),
        }
    return table


_OPTIONS = _option_table()
_STAT_NAMES = tuple(_s(lib.hl_stat_name(i)) for i in range(lib.hl_stat_count()))


def _event_fields(kind):
    fields = []
    while lib.hl_event_field(kind, len(fields)) != ffi.NULL:
        fields.append(_s(lib.hl_event_field(kind, len(fields))))
    return tuple(fields)


_EVENTS = tuple((_s(lib.hl_event_name(k)), _event_fields(k)) for k in range(lib.HL_EV_COUNT))
_SITES = tuple(_s(lib.hl_fault_site_name(i)) for i in range(lib.HL_SITE_COUNT))
_MODES = tuple(_s(lib.hl_fault_mode_name(i)) for i in range(lib.HL_FAULT_MODE_COUNT))


def _elf_header(path: str) -> Optional[Tuple[int, Optional[str]]]:
    """(e_type, the program interpreter PT_INTERP names or None) of an ELF
    file; None when path is no ELF file or cannot be read.  One reader for
    preload_path's check and the harness's "statically linked" test (they
    read the header twice, byte order apart)."""
    import struct
    try:
        with open(path, "rb") as f:
            head = f.read(64)
            if head[:4] != b"\x7fELF" or len(head) < 64:
                return None
            end = "<" if head[5] == 1 else ">"
            e_type, = struct.unpack(end + "H", head[16:18])
            if head[4] == 2:        # 64-bit
                phoff, = struct.unpack(end + "Q", head[32:40])
                phentsize, phnum = struct.unpack(end + "HH", head[54:58])
                off_at, size_at, size_fmt = 8, 32, "Q"
            else:
                phoff, = struct.unpack(end + "I", head[28:32])
                phentsize, phnum = struct.unpack(end + "HH", head[42:46])
                off_at, size_at, size_fmt = 4, 16, "I"
            f.seek(phoff)
            table = f.read(phentsize * phnum)
            for i in range(phnum):
                e = table[i * phentsize:(i + 1) * phentsize]
                if len(e) < phentsize or struct.unpack(end + "I", e[:4])[0] != 3:   # PT_INTERP
                    continue
                off, = struct.unpack(end + size_fmt, e[off_at:off_at + struct.calcsize(size_fmt)])
                size, = struct.unpack(end + size_fmt,
                                      e[size_at:size_at + struct.calcsize(size_fmt)])
                f.seek(off)
                return e_type, f.read(min(size, 4096)).split(b"\0")[0].decode(errors="replace")
            return e_type, None
    except (OSError, struct.error):
        return None


def preload_path() -> str:
    """The path of libheaplab-malloc.so, heaplab's manual mode as the malloc
    of any dynamically linked program (LD_PRELOAD; docs/clients.md):
    $HEAPLAB_PRELOAD when set, else the copy installed with this package.
    Raises heaplab.Error when neither exists."""
    import os
    env = os.environ.get("HEAPLAB_PRELOAD")
    if env:
        if not os.path.isfile(env):
            raise Error(f"HEAPLAB_PRELOAD={env}: no such file")
        if not os.access(env, os.R_OK):
            raise Error(f"HEAPLAB_PRELOAD={env}: cannot read it")
        # an ELF shared object, ET_DYN (3) without a program interpreter: a
        # PIE executable is ET_DYN too, and ld.so refuses it as anything else
        # ("cannot be preloaded ... ignored"): the program ran on the system
        # allocator (the review, session 26: /bin/ls was taken)
        elf = _elf_header(env)
        if elf is None or elf[0] != 3 or elf[1] is not None:
            raise Error(f"HEAPLAB_PRELOAD={env}: not a shared object (ld.so would not preload "
                        f"it): name a built libheaplab-malloc.so "
                        f"(build/clients/preload/libheaplab-malloc.so)")
        return os.path.abspath(env)
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "libheaplab-malloc.so")
    if os.path.isfile(here):
        return here
    raise Error(f"libheaplab-malloc.so is not installed with this package ({here}): "
                "reinstall it (pip install .) on Linux, or set HEAPLAB_PRELOAD to a built "
                "copy (build/clients/preload/libheaplab-malloc.so)")


def options() -> Dict[str, Dict[str, Any]]:
    """The option table: name -> {kind, default, min, max, choices, collected_only,
    description}.  collected_only: only collected heaps read the option (a manual
    heap ignores its HEAPLAB_ variable)."""
    return {k: dict(v) for k, v in _OPTIONS.items()}


def stat_names() -> Tuple[str, ...]:
    """The names of the heap's counters (HL_STATS), in the order of Stats."""
    return _STAT_NAMES


def fault_sites() -> Tuple[str, ...]:
    """The fault-injection sites (HL_FAULT_SITES): what Heap.inject() takes as site."""
    return _SITES


def fault_modes() -> Tuple[str, ...]:
    """The fault schedules Heap.inject() takes as mode (first, always, every, sticky, off)."""
    return _MODES


# ---- value types ----------------------------------------------------------------

def _fields(ctype):
    """The field names of a C struct, in declaration order (from heaplab.h)."""
    return [name for name, _ in ffi.typeof(ctype).fields]


def _tuple_of(cls, cdata):
    return cls(*(getattr(cdata, f) for f in cls._fields))


if TYPE_CHECKING:   # the same fields, as typed classes generated from heaplab.h
    from ._options import ChurnResult, Footprint
else:
    Footprint = collections.namedtuple("Footprint", _fields("hl_footprint"))
    Footprint.__doc__ = "Bytes charged to this process (Linux: /proc/self/smaps_rollup)."

    ChurnResult = collections.namedtuple("ChurnResult", _fields("hl_churn_result"))
    ChurnResult.__doc__ = "What Heap.churn() did: bytes and objects allocated, cycles, pacing."


def footprint() -> Footprint:
    """This process's footprint now: rss, anonymous, lazyfree, swap, phys_footprint, and
    anon_huge (AnonHugePages: the part of anonymous that transparent huge pages back)."""
    f = ffi.new("hl_footprint *")
    rc = lib.hl_footprint_get(f)
    if rc != lib.HL_OK:     # (the library's message names the file and the reason)
        _raise(rc, _s(lib.hl_heap_error(ffi.NULL)))
    return _tuple_of(Footprint, f)


class Stats(_Slotted):
    """The heap's counters (names from HL_STATS in heaplab.h): attribute access
    and as_dict()."""

    __slots__ = ("_values",)

    def __init__(self, values: Dict[str, int]) -> None:
        object.__setattr__(self, "_values", values)

    def __getattr__(self, name: str) -> int:
        if name.startswith("_"):   # (not a stat: no recursion through _values)
            self._missing(name)
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"Stats has no field {name!r}") from None

    def __reduce__(self) -> Tuple[Any, ...]:
        return (Stats, (dict(self._values),))

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError("Stats is read-only")

    def as_dict(self) -> Dict[str, int]:
        """The counters as a new dict: name -> value."""
        return dict(self._values)

    def __iter__(self) -> Iterator[Tuple[str, int]]:
        return iter(self._values.items())

    def _repr(self) -> str:
        keys = ("cycles", "major_sweeps", "total_pages", "free_pool_pages", "released_pool_pages",
                "released_pages", "small_live_bytes", "large_live_bytes")
        return "Stats(" + ", ".join(f"{k}={self._values[k]}" for k in keys) + ", ...)"


class Event(_Slotted):
    """One structured record of the heap's event ring: kind, cycle, time_ns and
    the kind's own fields (names from HL_EVENTS in heaplab.h)."""

    __slots__ = ("kind", "cycle", "time_ns", "fields")

    kind: str
    cycle: int
    time_ns: int
    fields: Dict[str, int]

    def __init__(self, kind: str, cycle: int, time_ns: int, fields: Dict[str, int]) -> None:
        self.kind, self.cycle, self.time_ns, self.fields = kind, cycle, time_ns, fields

    def __getattr__(self, name: str) -> int:
        if name.startswith("_") or name in Event.__slots__:  # (a slot not set yet)
            self._missing(name)
        try:
            return self.fields[name]
        except KeyError:
            raise AttributeError(f"{self.kind} event has no field {name!r}") from None

    def __reduce__(self) -> Tuple[Any, ...]:
        return (Event, (self.kind, self.cycle, self.time_ns, dict(self.fields)))

    def as_dict(self) -> Dict[str, Any]:
        """kind, cycle, time_ns and the kind's fields as one dict."""
        return {"kind": self.kind, "cycle": self.cycle, "time_ns": self.time_ns, **self.fields}

    def _repr(self) -> str:
        f = ", ".join(f"{k}={v}" for k, v in self.fields.items())
        return f"Event({self.kind}, cycle={self.cycle}, {f})"


def _event(e: Any) -> "Event":
    """An hl_event as an Event (module-level Event: what tests replace)."""
    name, fields = _EVENTS[e.kind]
    return Event(name, e.cycle, e.time_ns,
                 {f: e.fields[k] for k, f in enumerate(fields) if k < e.nfields})


# ---- what a Python value is ---------------------------------------------------------
# Integers are int or any type with __index__ (numpy's np.int64, np.uint32...),
# as range() and list indexing take them; booleans are bool or numpy's bool
# (which has no __index__, and whose type is named just 'bool').

def _tname(value: Any) -> str:
    """The type of value as an error names it: numpy.int64, not int64 (and
    numpy.bool, not a bare 'bool' beside Python's)."""
    t = type(value)
    return t.__qualname__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _is_bool(value: Any) -> bool:
    t = type(value)
    return isinstance(value, bool) or (t.__module__ == "numpy" and t.__name__ in ("bool", "bool_"))


def _as_int(value: Any) -> Optional[int]:
    """value as a Python int when it is an integer (not a bool), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return int(value)
    if isinstance(value, (float, str, bytes, bytearray)):
        return None
    try:
        return operator.index(value)
    except TypeError:
        return None


# ---- options ------------------------------------------------------------------------
# The C library converts and checks every option value (hl_options_set_value):
# this only says what Python type a value has.

def _typed(value, kind=None):
    """(type, integer, bytes) of a Python value, as hl_options_set_value takes
    it, for an option of that kind ("int", "bytes", "bool", "enum")."""
    if _is_bool(value):
        return lib.HL_VALUE_BOOL, int(bool(value)), b""
    number = _as_int(value)
    if number is not None:
        if -(1 << 63) <= number < (1 << 63):
            return lib.HL_VALUE_INT, number, b""
        if kind in ("bool", "enum"):   # (an integer of any size is the wrong type there)
            return lib.HL_VALUE_OTHER, 0, f"the integer {number}".encode()
        return lib.HL_VALUE_STRING, 0, str(number).encode()  # C says it is out of range
    if isinstance(value, str):
        return lib.HL_VALUE_STRING, 0, value.encode("utf-8", "surrogateescape")
    if isinstance(value, numbers.Real):
        return lib.HL_VALUE_OTHER, 0, f"the number {value!r}".encode()
    return lib.HL_VALUE_OTHER, 0, f"a {_tname(value)}".encode()


def _build_options(kwargs: Mapping[str, Any]) -> Any:
    opts = ffi.new("hl_options *")
    err = ffi.new("char[1024]")
    lib.hl_options_defaults(opts)
    for k in kwargs:
        if "\0" in k:
            raise UnknownOption(f"unknown option {k!r} (an option name has no NUL byte)")
    for name, value in kwargs.items():
        kind, number, text = _typed(value, _OPTIONS.get(name, {}).get("kind"))
        rc = lib.hl_options_set_value(opts, name.encode("utf-8", "surrogateescape"), kind, number,
                                      text, len(text), err, 1024)
        if rc:
            _raise(rc, _s(err))
    # an explicit option overrides its HEAPLAB_<NAME> variable (even a bad one);
    # the environment comes after the explicit options so that it sees the mode
    # (a manual heap ignores the collector's switches the environment gives)
    names = [ffi.new("char[]", k.encode("utf-8", "surrogateescape")) for k in kwargs]
    rc = lib.hl_options_from_env_except(opts, ffi.new("char *[]", names), len(names), err, 1024)
    if rc:
        _raise(rc, _s(err))
    rc = lib.hl_options_validate(opts, err, 1024)
    if rc:
        _raise(rc, _s(err))
    return opts


def _options_dict(opts: Any) -> Dict[str, Any]:
    out = {}
    for i, (name, spec) in enumerate(_OPTIONS.items()):
        v = getattr(opts, name)
        if spec["kind"] == "bool":
            v = bool(v)
        elif spec["kind"] == "enum":
            v = _s(lib.hl_option_choice(i, v))
        out[name] = v
    return out


# ---- argument conversion ---------------------------------------------------------------
# Python values to the C types of the calls.  What a value may be -- a size's
# maximum, a count's range -- the C library checks, once, for every language.

def _int(name: str, value: Any) -> int:
    number = _as_int(value)
    if number is None:
        raise TypeError(f"{name} must be an int, not {_tname(value)}")
    return number


# A value the C argument's 64-bit type cannot hold never reaches C, which names
# the range it checks; the binding names that range itself, as C says it of the
# rest ("fn: name value out of range [low, high]"), `within` = (fn, low, high).
# Where the 64-bit type is all the bound there is, `high` is the type's most,
# said as Python writes it: [0, 2**64-1].  ("does not fit in 64 bits" named no
# range where one value more than C's maximum named it; session 44.)
_U64_MAX = (1 << 64) - 1
_I64_MIN, _I64_MAX = -(1 << 63), (1 << 63) - 1
_TYPE_BOUNDS = {_U64_MAX: "2**64-1", _I64_MAX: "2**63-1", _I64_MIN: "-2**63"}


def _out_of_range(name: str, value: int, within: Tuple[str, int, Any]) -> "InvalidArgument":
    fn, low, high = within
    if callable(high):   # (a bound that costs a C call: asked only for the message)
        high = high()
    low_s, high_s = (_TYPE_BOUNDS.get(x, str(x)) for x in (low, high))
    return InvalidArgument(f"{fn}: {name} {value} out of range [{low_s}, {high_s}]")


def _u64(name: str, value: Any, within: Tuple[str, int, Any]) -> int:
    """An int for a uint64_t argument; `within` the range C checks (above)."""
    value = _int(name, value)
    if value < 0:
        raise InvalidArgument(f"{name} must be >= 0, got {value}")
    if value > _U64_MAX:
        raise _out_of_range(name, value, within)
    return value


def _i64(name: str, value: Any, within: Tuple[str, int, Any]) -> int:
    """An int for an int64_t argument; `within` the range C checks (above)."""
    value = _int(name, value)
    if not _I64_MIN <= value <= _I64_MAX:
        raise _out_of_range(name, value, within)
    return value


def _number(name, value):
    """A float for a double argument."""
    if _is_bool(value) or not (isinstance(value, numbers.Real) or _as_int(value) is not None):
        raise TypeError(f"{name} must be a number, not {_tname(value)}")
    return float(value)


# ---- owners of C objects ----------------------------------------------------------------
# A Heap and a Sampler own a C object that close() frees.  Calls in flight must
# finish first (other threads), and a close() from inside a call of the same
# thread -- a finalizer that runs while a method of the same heap allocates --
# must not wait for itself: it defers the free to the end of that call.
#
# _LOCK: the condition's lock is reentrant.  Any allocation may run a garbage
# collection, and a finalizer in it may close the same owner -- also while
# close() or _settle() holds the lock (a tuple in Condition.__exit__, the
# thread-local's first dict, the free itself): with a plain Lock that nested
# close() waited for its own thread for ever.  Reentered, it finds the owner
# closed (close() marks it first) and returns.
#
# The counts are kept exact under KeyboardInterrupt and thread switches: CPython
# (3.11 and later) handles signals and switches threads only at calls, loops and
# function entry, never between the plain attribute loads, stores and integer
# operations that check, count and enter the protected block below, so no
# interrupt can land between counting a call and the `try` that uncounts it.
# (A free-threaded build of CPython gives no such guarantee.)

_T = TypeVar("_T", bound="_Owned")


class _Here(threading.local):
    depth = 0   # calls of one owner in flight in this thread


# Every open owner, for the fork child: the threads that had calls in flight
# did not come along, so their calls never finish there -- close() waited for
# them forever -- and one of them may have held the condition's lock.
# Weak references without a callback, the dead ones dropped as the table
# grows: a weakref.WeakSet's callback is Python code run at each owner's
# deallocation, where a KeyboardInterrupt is swallowed ("Exception ignored
# in ...") -- docs/design.md, "The bindings' lifetimes".
_LIVE_OWNERS: "Dict[int, weakref.ReferenceType[_Owned]]" = {}
_OWNER_KEYS = itertools.count()
_LIVE_OWNERS_PRUNE_AT = [64]


def _register_owner(owner: "_Owned") -> None:
    if len(_LIVE_OWNERS) >= _LIVE_OWNERS_PRUNE_AT[0]:
        for k in [k for k, r in list(_LIVE_OWNERS.items()) if r() is None]:
            _LIVE_OWNERS.pop(k, None)
        _LIVE_OWNERS_PRUNE_AT[0] = max(64, 2 * len(_LIVE_OWNERS))
    _LIVE_OWNERS[next(_OWNER_KEYS)] = weakref.ref(owner)


def _after_fork_child() -> None:
    for r in list(_LIVE_OWNERS.values()):
        owner = r()
        if owner is not None:
            owner._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_child)


def _checked(ptr: Any, fn: Any, *args: Any) -> None:
    """fn(ptr, *args); a non-zero code raises with the heap's message, read
    with the same ptr before the call that owns it ends."""
    rc = fn(ptr, *args)
    if rc:
        _raise(rc, _s(lib.hl_heap_error(ptr)))


class _Owned(_Slotted):
    """The C object lives in an anchor (owners.h) that frees it on close() or,
    if the Python object dies open, from cffi's deallocation -- in C, where no
    KeyboardInterrupt can land (a __del__ would have swallowed one)."""

    __slots__ = ("_ptr", "_anchor", "_serial", "_closed", "_finalized", "_calls", "_here", "_freed",
                 "_mutex",
                 "_pending", "__weakref__")
    _what = "the object"

    def _fresh(self) -> None:
        """__init__'s first step: refuse a second __init__, which replaced
        the C object under the Refs of the first (freed with them alive,
        their handles then read in the new one)."""
        if self._has("_anchor"):
            raise TypeError(f"a heaplab.{type(self).__name__} cannot be initialised twice "
                            f"(make a new one)")

    def _anchored(self, kind: int) -> Any:
        """A new anchor (kind 0 heap, 1 sampler), still empty."""
        self._ptr = ffi.NULL
        self._closed = True   # until the object exists
        a = lib.hlpy_anchor_new(ffi.NULL, kind)
        if a == ffi.NULL:
            raise OutOfMemory(f"{self._what}: out of memory")
        self._anchor = ffi.gc(a, lib.hlpy_anchor_drop)
        return self._anchor

    def _own(self, ptr: Any) -> None:
        self._serial = lib.hlpy_anchor_serial(self._anchor)
        self._ptr = ptr
        self._calls = 0
        self._here = _Here()
        self._new_lock()
        self._pending = False
        self._finalized = False
        self._closed = False
        _register_owner(self)

    def _after_fork(self) -> None:
        """In a fork child: only this thread's calls are still in flight."""
        self._new_lock()
        self._calls = self._here.depth
        if self._closed and not self._calls and self._ptr != ffi.NULL:
            self._pending = True   # the close() waiting in another thread stayed behind
            self._settle()

    def _new_lock(self) -> None:
        # the lock is taken with `with self._mutex` (a C context manager),
        # never waited on with a Condition: Condition.wait releases the lock
        # before its try/finally, and a KeyboardInterrupt landing just after
        # left it released -- the `with` exit then raised "cannot release
        # un-acquired lock" in place of the KeyboardInterrupt.  close() waits
        # on _freed instead, holding nothing (_CLOSE).
        self._mutex = threading.RLock()   # (_LOCK says why reentrant)
        # released by the free, once (_ptr cleared, after the C free that an
        # interrupt may follow: then the next close() frees, and releases);
        # close() waits on it with no lock held
        self._freed = threading.Lock()
        self._freed.acquire()

    def _settle(self) -> None:
        """The last call of a closed owner finished: free it (close() set
        _pending before it let go of the lock)."""
        with self._mutex:
            if self._pending and not self._calls:
                # the C free called here, not through a Python function whose
                # entry is an interrupt point (_CLOSE)
                if self._ptr != ffi.NULL:
                    lib.hlpy_anchor_close(self._anchor, self._serial)
                    self._ptr = ffi.NULL
                    self._freed.release()   # (once: _ptr is cleared once)
                self._pending = False

    def _closed_error(self) -> Error:
        if self._finalized:
            return HeapClosed(f"{self._what} was finalized by a garbage collection: it is garbage, "
                              f"and its C object was freed before this finalizer of the same "
                              f"garbage used it (it was not closed)")
        return HeapClosed(f"{self._what} is closed")

    def _gone(self) -> bool:
        """True when the C object is gone: closed, or freed by the owner's
        destructor in a garbage collection (then marked closed and finalized
        here, so that every later error says so)."""
        if self._closed:
            return True
        if lib.hlpy_anchor_obj(self._anchor, self._serial) == ffi.NULL:
            self._finalized = self._closed = True
            return True
        return False

    def _run(self, fn: Any, *args: Any) -> Any:
        """fn(ptr, *args) with the object kept alive for the call; its result."""
        # this thread's depth first: the first read in a thread makes the
        # thread-local's dict, an allocation that may run a garbage collection
        # -- and a finalizer in it that closes this owner.  Counted before
        # that, the close() waited for this thread's own call: a hang.
        here = self._here
        depth = here.depth
        if self._closed:
            raise self._closed_error()
        self._calls += 1
        here.depth = depth + 1
        try:
            # the object through its anchor, once counted (the C call lets
            # other threads run: a close() must see this call first): NULL
            # when the anchor's destructor ran -- this owner is garbage, and
            # a finalizer of the same garbage calls it after its C object was
            # freed (owners.c, spares)
            ptr = lib.hlpy_anchor_obj(self._anchor, self._serial)
            if ptr == ffi.NULL:
                self._finalized = self._closed = True   # (close() sets _closed first)
                raise self._closed_error()
            return fn(ptr, *args)
        finally:
            self._here.depth -= 1
            self._calls -= 1
            if self._closed and not self._calls:
                self._settle()

    def close(self) -> None:
        """Free the C object; idempotent.  Calls in flight in other threads
        finish first; inside a call of this thread (a finalizer) the free
        waits for the end of that call.  Interrupted (KeyboardInterrupt)
        while it waits, the owner is closed and the last call in flight
        frees it; interrupted just after the C free (a signal is checked when
        a C call returns), a later close() -- or the close() of another thread
        waiting -- finishes what the free left (freeing twice is nothing)."""
        if not self._has("_mutex"):   # __init__ failed (or did not run): nothing to free
            return
        # _CLOSE: everything is decided under the lock, and the free is made
        # there, called directly (a Python function's entry, and a with
        # block's exit, are interrupt points: an interrupt there lost the
        # free -- closed True, the C object and its thread alive).  The two
        # stores come first, with no call between them: from then on the
        # last call in flight frees (_settle), whatever interrupts this
        # close().  The wait holds no lock (_new_lock says why).
        while True:
            with self._mutex:
                self._closed = True
                self._pending = True
                if self._here.depth:
                    return   # this thread is inside one of our calls: its end frees
                if not self._calls:
                    if self._ptr != ffi.NULL:
                        lib.hlpy_anchor_close(self._anchor, self._serial)
                        self._ptr = ffi.NULL
                        self._freed.release()   # (once: _ptr is cleared once)
                    self._pending = False
                    return
            # freed by the last call, or a timeout (then the loop looks again)
            if self._freed.acquire(timeout=0.05):
                self._freed.release()   # for any other close() that waits

    @property
    def closed(self) -> bool:
        """True once close() ran."""
        return self._closed

    def __copy__(self) -> NoReturn:
        raise TypeError(f"a heaplab.{type(self).__name__} cannot be copied: it owns a C object "
                        f"(share the object itself)")

    def __deepcopy__(self, memo: Any) -> NoReturn:
        self.__copy__()

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError(f"a heaplab.{type(self).__name__} cannot be pickled: it owns a C object")

    def __enter__(self: _T) -> _T:
        if self._closed:
            raise self._closed_error()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- heaps ------------------------------------------------------------------------------

class Heap(_Owned):
    """A heaplab heap.  Keyword arguments are options (see heaplab.options());
    HEAPLAB_<NAME> environment variables change the defaults, an explicit
    option overrides its variable.

    Unknown option -> TypeError; bad value -> ValueError naming the option and
    its allowed range.  Use as a context manager or call close().  A Heap
    cannot be copied or pickled (it owns the C heap)."""

    __slots__ = ("_options", "_manual")
    _what = "the heap"

    def __init__(self, **options: Unpack[HeapOptions]) -> None:
        self._fresh()
        self._ptr = ffi.NULL
        self._closed = True   # until the C heap exists
        opts = _build_options(options)
        slot = lib.hlpy_anchor_heap_slot(self._anchored(0))
        err = ffi.new("char[1024]")
        rc = lib.hl_heap_new(opts, slot, err, 1024)
        if rc:
            _raise(rc, _s(err))
        # the heap's effective options (hl_heap_options): the reservation it
        # got, not the one asked for
        lib.hl_heap_options(slot[0], opts)
        self._options = _options_dict(opts)
        self._manual = self._options["mode"] == "manual"
        self._own(slot[0])

    # -- plumbing --
    def _call(self, fn: Any, *args: Any) -> None:
        """fn(ptr, *args) through _run; a failure raises its error with the
        heap's message, read while the call still counts (a close() in
        another thread waits for it and has not freed the heap)."""
        self._run(_checked, fn, *args)

    def _root(self) -> Tuple[Any, Any]:
        """An empty root of this heap, owned by C (owners.h): (the root, with
        its destructor; the memory it lives in).  The owner keeps both: in a
        garbage collection's finalize phase cffi runs the destructor and then
        lets go of the memory (cdatagcp_finalize), and a finalizer of the same
        garbage that used the Ref after that read freed memory -- a release()
        there dropped whichever handle a new Ref had put in it."""
        mem = ffi.new("hlpy_root *")
        root = ffi.gc(mem, lib.hlpy_root_done)
        if lib.hlpy_root_init(root, self._anchor, self._serial):
            # the anchor's destructor ran: this heap is garbage, and a
            # finalizer of the same garbage makes a Ref of it
            self._finalized = self._closed = True
            raise self._closed_error()
        return root, mem

    def _new_ref(self, fn: Any, *args: Any) -> Ref:
        """A call that makes a handle (its last argument) into a new Ref: the
        call writes the handle into the Ref's root, which exists before it, so
        no KeyboardInterrupt can leave a handle that nothing owns."""
        root, mem = self._root()
        ref = Ref.__new__(Ref)
        ref._heap = self
        ref._root = root
        ref._root_mem = mem
        ref._hash = None
        self._call(fn, *args, ffi.addressof(root, "ref"))
        return ref

    def _repr(self) -> str:
        if self._gone():
            return f"<heaplab.Heap {'finalized' if self._finalized else 'closed'}>"
        s = self.stats()
        # the pages by state: the pool counts, which add up to total_pages
        # (the rare ones when there are some; free and released alone left
        # out the owned, retired and partial pages)
        parts = [("owned", s.owned_pages), ("retired", s.retired_pool_pages),
                 ("partial", s.partial_pool_pages), ("free", s.free_pool_pages),
                 ("released", s.released_pool_pages)]
        parts += [(k, v) for k, v in (("reuse_failed", s.reuse_failed_pool_pages),
                                      ("in_flight", s.in_flight_pages)) if v]
        shown = " ".join(f"{k}={v}" for k, v in parts)
        return (f"<heaplab.Heap {self._options['mode']} pages={s.total_pages} ({shown}) "
                f"cycles={s.cycles}>")

    @property
    def options(self) -> Dict[str, Any]:
        """The effective options (defaults, environment, arguments), as the heap
        runs with them: reserve_bytes is the reservation it got (rounded to
        whole pages, halved while the kernel refused it: stats().reserved_bytes),
        young_min_bytes at most young_bytes (hl_heap_options)."""
        return dict(self._options)

    # -- objects --
    def alloc(self, size: int, refs: int = 0) -> Ref:
        """A new object with `size` payload bytes and `refs` empty slots, as a Ref."""
        return self._new_ref(lib.hl_alloc, _u64("size", size, ("alloc", 0, MAX_SIZE)),
                             _u64("refs", refs, ("alloc", 0, MAX_REFS)))

    def conservative_region(self, words: int) -> ConservativeRegion:
        """A root region of `words` machine words scanned conservatively (E7):
        any word that points at an allocated object -- or into one, with the
        option conservative_interior (the default) -- keeps it and what it
        refers to alive, as a stale word on a stack does.  The words start
        zero; see ConservativeRegion.  A manual heap raises ModeError."""
        # (>= 1 for a negative count too: "must be >= 0" then refused 0)
        if isinstance(words, int) and not isinstance(words, bool) and words < 1:
            raise InvalidArgument(f"conservative_region: words must be >= 1, got {words}")
        n = _u64("words", words, ("conservative_region", 1,     # (roots_fit's bound)
                                  lambda: self.stats().reserved_bytes // ffi.sizeof("void *")))
        if n == 0:
            raise InvalidArgument("conservative_region: words must be >= 1, got 0")
        mem = ffi.new("hlpy_region *")     # (kept by the region, as a Ref's root: _root)
        reg = ffi.gc(mem, lib.hlpy_region_done)
        try:
            self._call(lib.hlpy_region_open, reg, self._anchor, n)
        except OutOfMemory:
            raise OutOfMemory(f"conservative_region: cannot allocate {n} words") from None
        except (ModeError, InvalidArgument) as e:   # (larger than the heap: hl_roots_fit)
            raise type(e)(f"conservative_region: {e}") from None
        region = ConservativeRegion.__new__(ConservativeRegion)
        region._heap = self
        region._region = reg
        region._region_mem = mem
        return region

    def fill(self, total_bytes: int, size: int, refs: int = 0, stride: int = 1) -> Ref:
        """Bulk phase in C (GIL released): objects of `size` until total_bytes,
        payload touched, reachable from the returned Ref (one slot per page the
        objects landed on, each holding that page's index).  stride=N keeps
        only every Nth object (the rest are garbage at once), so the pages come
        out partially live."""
        return self._new_ref(lib.hl_fill_stride,
                             _u64("total_bytes", total_bytes, ("fill", 0, MAX_SIZE)),
                             _u64("size", size, ("fill", 0, MAX_SIZE)),
                             _u64("refs", refs, ("fill", 0, MAX_REFS)),
                             _u64("stride", stride, ("fill", 1, lib.HL_FILL_MAX_STRIDE)))

    def thin(self, ref: Ref, every: int) -> Ref:
        """A new root holding every `every`-th leaf of the graph under `ref`
        (the leaves: objects with no non-empty slot, in depth-first slot order
        -- a fill's objects in the order it made them).  Nothing is dropped:
        release `ref` afterwards and only those leaves survive, scattered over
        the pages the graph filled (E10)."""
        if not isinstance(ref, Ref):
            raise TypeError(f"thin: ref must be a heaplab.Ref, not {type(ref).__name__}")
        if ref._heap is not self:
            raise _foreign("thin: the Ref belongs to another heap")
        ref._h()
        return self._new_ref(lib.hl_thin, ref._ref,
                             _u64("every", every, ("thin", 1, lib.HL_THIN_MAX_EVERY)))

    def collect(self, cycles: int = 1, major: Optional[bool] = None) -> None:
        """Synchronous full collection(s); major=True forces a major sweep,
        False forbids it, None lets the policy decide."""
        if major is not None and not _is_bool(major):
            raise TypeError(f"collect: major must be None, True or False, not {major!r}")
        n = _int("cycles", cycles)
        if not -(1 << 63) <= n < 1 << 63:
            # (C's int64_t cannot hold it: C's message, its range -- "does not
            # fit in 64 bits" named no range where 10**7 named [1, 1000000])
            raise InvalidArgument(
                f"collect: cycles {n} out of range [1, {lib.HL_COLLECT_MAX_CYCLES}]")
        self._call(lib.hl_collect, n, -1 if major is None else int(bool(major)))

    def trim(self) -> None:
        """Trim now: release every free page beyond the warm cache (and
        upgrade fallback pages), in passes of release_per_sweep pages with the
        heap lock dropped between them.  A cycle's own trim is one pass: a
        drop of more than release_per_sweep pages goes back over the next
        cycles, or at once by trim()."""
        self._call(lib.hl_trim)

    def memory_pressure(self) -> None:
        """Tell the heap the OS is under pressure: the next cycle sweeps major.
        A manual heap has no cycle: ModeError, as collect()."""
        self._call(lib.hl_memory_pressure)

    def check(self) -> None:
        """Check every heap invariant; raises heaplab.CheckFailed naming the first
        one that does not hold."""
        self._call(lib.hl_heap_check)

    @property
    def last_error(self) -> str:
        """The heap's last failure message (hl_heap_error): this thread's last
        failed call on the heap the first time it is read, after that the heap's
        last failure in any thread -- a background or an allocation's cycle whose
        verification failed (verify=True: a verify_failed event, and
        stats().verify_failures, say when), which has no caller to raise in.
        '' when there was none."""
        return self._run(lambda ptr: _s(lib.hl_heap_error(ptr)) or "")

    def churn(self, duration_s: float, size: int, live_bytes: int,
              rate_bytes_per_s: Optional[float] = None) -> ChurnResult:
        """Keep a ring of live_bytes of objects of `size` alive while allocating
        at rate_bytes_per_s (None = as fast as possible) for duration_s."""
        rate = 0.0 if rate_bytes_per_s is None else _number("rate_bytes_per_s", rate_bytes_per_s)
        out = ffi.new("hl_churn_result *")
        # (live_bytes: C bounds the ring, live_bytes / size objects; with the
        # largest size that takes every live_bytes the 64-bit type holds)
        self._call(lib.hl_churn, _number("duration_s", duration_s),
                   _u64("size", size, ("churn", 0, MAX_SIZE)),
                   _u64("live_bytes", live_bytes, ("churn", 0, _U64_MAX)), rate, out)
        return _tuple_of(ChurnResult, out)

    # -- telemetry --
    def stats(self) -> Stats:
        """The heap's counters now (names: heaplab.stat_names())."""
        out = ffi.new("hl_stats *")
        self._call(lib.hl_stats_get, out)
        return Stats({name: getattr(out, name) for name in _STAT_NAMES})

    def events(self, clear: bool = True) -> List[Event]:
        """The structured events recorded since the last read (clear=True
        consumes exactly those returned: a call that raises -- a
        MemoryError building the list included -- consumes none)."""
        if not _is_bool(clear):
            raise TypeError(f"events: clear must be True or False, not {clear!r}")
        # Peek, build the list, and only then consume the events returned
        # (up to the last one's number): consuming first lost every event
        # when building raised.  One recorded meanwhile (another thread, the
        # background collector) stays for the next read; those another read
        # consumed meanwhile are its, not returned here.
        cap = self._options["events_capacity"]
        buf = ffi.new("hl_event[]", cap)
        n = ffi.new("size_t *")
        first = ffi.new("uint64_t *")
        self._call(lib.hl_events_peek, buf, cap, n, first)
        out = [_event(buf[i]) for i in range(n[0])]
        if clear and out:
            kept_from = ffi.new("uint64_t *")
            self._call(lib.hl_events_consume, first[0] + len(out), kept_from)
            # another read (a finalizer, another thread) consumed these first
            out = out[max(0, min(len(out), kept_from[0] - first[0])):]
        return out

    def resident_bytes(self) -> int:
        """Bytes of the heap's own reservation the kernel charges now (its Rss).

        Pages present and not the kernel's shared zero page (ioctl
        PAGEMAP_SCAN, Linux 6.7+); mincore, which counts zero pages too,
        where the kernel has no PAGEMAP_SCAN or /proc is not mounted."""
        out = ffi.new("uint64_t *")
        self._call(lib.hl_resident_bytes, out)
        return out[0]

    def vma_count(self) -> int:
        """VMAs of /proc/self/maps that overlap the heap's reservation."""
        out = ffi.new("uint64_t *")
        self._call(lib.hl_vma_count, out)
        return out[0]

    def range(self) -> Tuple[int, int]:
        """(base address, reserved bytes) of the heap's reservation."""
        base, size = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        self._call(lib.hl_heap_range, base, size)
        return base[0], size[0]

    # -- fault injection --
    def inject(self, site: str, mode: str, n: int = 0, errno: Union[str, int] = "ENOMEM") -> None:
        """Arm a fault schedule: site in heaplab.fault_sites(), mode in
        heaplab.fault_modes() ('first' N calls, 'always', 'every' Nth call,
        'sticky' on page N, 'off': disarmed, no errno recorded), errno by
        name (any errno name: 'ENOSPC') or number."""
        if not isinstance(site, str):
            raise TypeError(f"inject: site must be a string, not {type(site).__name__}")
        if not isinstance(mode, str):
            raise TypeError(f"inject: mode must be a string, not {type(mode).__name__}")
        if isinstance(errno, str):
            e = errno
        elif _as_int(errno) is not None:
            e = str(_as_int(errno))
        else:
            raise TypeError(f"inject: errno must be a name or an int, not {errno!r}")
        site_c, mode_c, errno_c = (_cstr("inject: site", site), _cstr("inject: mode", mode),
                                   _cstr("inject: errno", e))
        number = _int("n", n)
        if not _I64_MIN <= number <= _I64_MAX:
            # the range n's mode takes; an unknown site or mode is C's to name
            # (n 0 then, never looked at)
            m = lib.hl_fault_mode_index(mode_c)
            if m >= 0 and lib.hl_fault_site_index(site_c) >= 0:
                raise _out_of_range("n", number, ("inject", lib.hl_fault_mode_min_arg(m), _I64_MAX))
            number = 0
        self._call(lib.hl_inject_named, site_c, mode_c, number, errno_c)

    @property
    def faults(self) -> Dict[str, Dict[str, Any]]:
        """What is armed at each site and how often it fired: errno by name
        ('ENOSPC'; 'E<n>' for a number without one), None while none is set
        (never armed, or disarmed by 'off')."""
        buf = ffi.new("hl_fault_state[]", len(_SITES))
        n = ffi.new("size_t *")
        self._call(lib.hl_faults_get, buf, len(_SITES), n)
        out = {}
        for i in range(n[0]):
            f = buf[i]
            out[_SITES[f.site]] = {"mode": _MODES[f.mode], "n": f.arg,
                                   "errno": _s(lib.hl_errno_name(f.err)) if f.err else None,
                                   "calls": f.calls, "fired": f.fired}
        return out


def _document_options(cls: type) -> None:
    """Heap's signature and docstring list every option, from OPTION_TABLE
    (generated at build time from heaplab.h's HL_OPTIONS): help(heaplab.Heap)
    and inspect.signature show them all, with their C defaults."""
    types = {"bool": "bool", "int": "int", "bytes": "int | str"}
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    lines = ["", "", "Options (name: type = C default -- allowed values; description):", ""]
    for name, kind, default, lo, hi, choices, desc in OPTION_TABLE:
        ann = " | ".join(repr(c) for c in choices) if kind == "enum" else types[kind]
        params.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default,
                                        annotation=ann))
        allowed = "|".join(choices) if kind == "enum" else (
            "True|False" if kind == "bool" else f"{lo}..{hi}")
        lines.append(f"    {name}: {ann} = {default!r} -- {allowed}")
        lines.append(f"        {desc}")
    init = cls.__init__  # type: ignore[misc]
    init.__signature__ = inspect.Signature(params, return_annotation=None)
    cls.__doc__ = (cls.__doc__ or "") + "\n".join(lines)


_document_options(Heap)


class Ref(_Slotted):
    """A root: while this Ref lives its object survives.  Slots are 0-based;
    o[i] = other_ref_or_None; o[i] -> Ref or None.  release(), `del`, or a
    `with` block drop the root (idempotent).  copy.copy(ref) is ref.dup() (a
    second root); a Ref cannot be deep-copied or pickled."""

    __slots__ = ("_heap", "_root", "_root_mem", "_hash", "__weakref__")
    _made_by = "Heap.alloc, fill, thin, r[i] or r.dup()"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # (Ref(heap, handle) made a second owner of a handle: when it died
        # it released the first one's root, and the object went)
        raise TypeError("a heaplab.Ref is made by the heap (Heap.alloc, fill, thin, r[i], "
                        "r.dup()), not by calling Ref")

    @property
    def _ref(self):
        return self._root.ref

    def _finalized(self) -> bool:
        """True when its root was dropped by its destructor, in a garbage
        collection that found this Ref garbage (hlpy_root_done forgets the
        anchor; release() keeps it)."""
        return bool(self._root.anchor == ffi.NULL)

    def _h(self) -> Heap:
        return self._live()[0]

    def _live(self) -> Tuple[Heap, int]:
        """(the heap, the handle) -- the handle read once: a release() in
        another thread between a check and a second read of it passed 0 to
        the library, whose 'handle is null' was an InvalidArgument.  Read
        once, a handle released meanwhile is stale there: StaleRef."""
        ref = self._ref
        if ref == 0:
            if self._finalized():
                raise StaleRef("this Ref was finalized by a garbage collection: it is garbage, and "
                               "its root was dropped before this finalizer of the same garbage "
                               "used it (it was not released)")
            raise StaleRef("this Ref was released (release(), or the end of its with block)")
        return self._heap, ref

    def _info(self) -> Any:
        h, ref = self._live()
        out = ffi.new("hl_object_info *")
        h._call(lib.hl_ref_info, ref, out)
        return out

    @property
    def heap(self) -> Heap:
        """The heap the object lives in."""
        return self._heap

    @property
    def size(self) -> int:
        """Payload bytes."""
        return self._info().size

    @property
    def address(self) -> int:
        """The payload's address now (with compact on, a collection may move
        the object: the Ref follows it, this number does not)."""
        return self._info().address

    @property
    def large(self) -> bool:
        """True when the object is on the large path (size > small_max)."""
        return bool(self._info().large)

    @property
    def released(self) -> bool:
        """True once this Ref roots nothing any more: dropped (release(), del,
        the end of a with block) or its heap closed.  Never raises (as
        Heap.closed; the Lua binding's o:released() says the same)."""
        return self._ref == 0 or self._heap._gone()

    def __len__(self) -> int:
        return self._info().refs

    def _index(self, i: int) -> int:
        i = _int("slot index", i)
        n = len(self)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            slots = "1 slot" if n == 1 else f"{n} slots"
            raise SlotIndexError(f"slot {i} out of range for an object with {slots}")
        return j

    def __getitem__(self, i: int) -> Optional[Ref]:
        j = self._index(i)
        h, ref = self._live()
        r = h._new_ref(lib.hl_ref_get, ref, j)
        return r if r._ref else None

    def __setitem__(self, i: int, value: Optional[Ref]) -> None:
        j = self._index(i)
        if value is None:
            v = 0
        elif isinstance(value, Ref):
            if value._heap is not self._heap:
                if value._heap.closed:   # (was named another heap's: say what it is)
                    raise HeapClosed("slot value: its heap is closed")
                raise _foreign("slot value belongs to another heap")
            v = value._live()[1]
        else:
            raise TypeError(f"a slot holds a Ref or None, not {type(value).__name__}")
        h, ref = self._live()
        h._call(lib.hl_ref_set, ref, j, v)

    def __iter__(self) -> Iterator[Optional[Ref]]:
        for i in range(len(self)):
            yield self[i]

    def dup(self) -> Ref:
        """A second, independent root to the same object."""
        h, ref = self._live()
        return h._new_ref(lib.hl_ref_dup, ref)

    def __copy__(self):
        return self.dup()

    def __deepcopy__(self, memo):
        raise TypeError("a heaplab.Ref cannot be deep-copied (copy.copy gives a second root "
                        "to the same object; the object itself lives in the heap)")

    def __reduce_ex__(self, protocol):
        raise TypeError("a heaplab.Ref cannot be pickled: it is a root of a heap in this process")

    def read(self, offset: int = 0, length: Optional[int] = None) -> bytes:
        """Copy payload bytes out (from offset, length bytes; the rest by default)."""
        size = self.size
        offset = _u64("offset", offset, ("read", 0, size))
        length = (max(size - offset, 0) if length is None
                  else _u64("length", length, ("read", 0, max(size - offset, 0))))
        # more than the payload holds: the library names the range (IndexError)
        # before anything is copied, so no buffer of that size is made
        buf = ffi.new("char[]", max(min(length, size), 1))
        h, ref = self._live()
        h._call(lib.hl_ref_read, ref, offset, buf, length)
        return bytes(ffi.buffer(buf, length))

    def write(self, data: Union[bytes, bytearray, memoryview], offset: int = 0) -> None:
        """Copy bytes (a bytes-like object) into the payload at offset."""
        # (a number is no data, even numpy's, which has a buffer: np.int64(5)
        # wrote its 8 bytes)
        if isinstance(data, (str, numbers.Number)) or _is_bool(data) or data is None:
            raise TypeError(f"write: data must be a bytes-like object, not {_tname(data)}")
        try:
            data = bytes(memoryview(data))
        except TypeError:
            raise TypeError(f"write: data must be a bytes-like object, "
                            f"not {_tname(data)}") from None
        offset = _u64("offset", offset, ("write", 0, lambda: self.size))
        h, ref = self._live()
        h._call(lib.hl_ref_write, ref, offset, data, len(data))

    def checksum(self) -> Tuple[int, int]:
        """(checksum, objects) over the payloads of everything reachable from
        this object; independent of addresses and traversal order."""
        s, n = ffi.new("uint64_t *"), ffi.new("uint64_t *")
        h, ref = self._live()
        h._call(lib.hl_ref_checksum, ref, s, n)
        return s[0], n[0]

    def release(self) -> None:
        """Drop this root (idempotent; a no-op once the heap is closed, and on
        a Ref not made by a heap).  Done in C, as when the Ref dies (owners.h)."""
        if self._has("_root"):
            lib.hlpy_root_release(self._root)

    def __enter__(self) -> Ref:
        """StaleRef when released, HeapClosed when its heap is closed (or
        freed by its destructor), as `with heap:` and `with region:`."""
        h = self._h()
        if h._gone():
            raise h._closed_error()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def _object(self) -> int:
        return self._info().object

    def __eq__(self, other: object) -> bool:
        """Refs to the same object of the same heap are equal; a released Ref
        (or one of a closed heap) is equal only to itself."""
        if not isinstance(other, Ref):
            return NotImplemented
        if other is self:
            return True
        if other._heap is not self._heap:
            return False
        # each handle read once: a release() in another thread between a
        # check and a second read (_live) raised StaleRef from ==
        ref, oref = self._ref, other._ref
        # _gone(), not the flag `closed`: a heap freed by its destructor in a
        # garbage collection (a __del__ of the same garbage compares its
        # Refs) is not marked closed until something looks
        if not ref or not oref or self._heap._gone():
            return False
        # one call, both objects read under one hold of the heap lock: two
        # reads of their addresses (hl_ref_info) could see a collection in
        # another thread, or the background collector, move the object
        # between them, and two Refs to it compared unequal
        out = ffi.new("int *")
        try:
            self._heap._call(lib.hl_ref_same, ref, oref, out)
        except (StaleRef, HeapClosed):
            # released, or the heap closed, since the reads above (HL_ESTALE;
            # a close() in another thread): equal only to itself (as Lua's
            # __eq); other errors raise
            return False
        return bool(out[0])

    def __hash__(self) -> int:
        # computed once: a Ref's hash does not change when it is released;
        # nor when compaction moves the object (hl_ref_identity: the address
        # when compact=never, else a number given when first asked, kept
        # through moves; two live objects never share one)
        # (released, or of a heap closed or freed by its destructor -- also
        # between the checks and the call: equal only to itself, hash id(self))
        if self._hash is None:
            ref = self._ref
            h = id(self)
            if ref and not self._heap._gone():
                out = ffi.new("uint64_t *")
                try:
                    self._heap._call(lib.hl_ref_identity, ref, out)
                    h = hash((id(self._heap), out[0]))
                except (StaleRef, HeapClosed):
                    pass
            self._hash = h
        return self._hash

    def _repr(self) -> str:
        if self._ref == 0:
            return f"<heaplab.Ref {'finalized' if self._finalized() else 'released'}>"
        if self._heap._gone():
            return (f"<heaplab.Ref of a {'finalized' if self._heap._finalized else 'closed'} "
                    f"heap>")
        i = self._info()
        return f"<heaplab.Ref size={i.size} refs={i.refs} at 0x{i.address:x}{' large' if i.large else ''}>"


_Word = Union[int, "Ref", None]


class ConservativeRegion(_Slotted):
    """A root region of machine words that the collector scans conservatively
    (C memory registered with hl_roots_add(..., conservative=1); make one with
    Heap.conservative_region(words)).  Any word that points at an allocated
    object -- or into one, when the heap's option conservative_interior is on
    (the default) -- keeps that object and everything it refers to alive; a
    word that points nowhere keeps nothing.  So a stale word keeps a dead
    structure, and scrubbing the region lets it go.

    region[i] = ref stores the address of ref's object (ref.address, the
    payload, is an interior address); region[i] = n stores any unsigned
    64-bit integer; region[i] = None stores 0; region[i] -> int.  Indexes are
    0-based (negative from the end).  write(values, start) stores many words
    at once, words() reads them all, scrub() zeroes them.  remove() (also
    `del`, or the end of a with block) unregisters and frees the region
    (idempotent); later use raises StaleRef, use after the heap was closed
    HeapClosed.  A region cannot be copied or pickled."""

    __slots__ = ("_heap", "_region", "_region_mem", "__weakref__")
    _made_by = "Heap.conservative_region(words)"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("make a region with Heap.conservative_region(words)")

    def _finalized(self) -> bool:
        """True when the region was removed by its destructor, in a garbage
        collection that found it garbage (hlpy_region_done forgets the
        anchor; remove() keeps it)."""
        return bool(self._region.anchor == ffi.NULL)

    def _stale(self) -> Error:
        if self._finalized():
            return StaleRef("this region was finalized by a garbage collection: it is garbage, "
                            "and it was removed before this finalizer of the same garbage used "
                            "it (remove() was not called)")
        return StaleRef("this region was removed (remove(), or the end of its with block)")

    def _heap_gone(self) -> Error:
        heap = self._heap
        heap._gone()
        if heap._finalized:
            return HeapClosed("the region's heap was finalized by a garbage collection: it is "
                              "garbage, and its C heap was freed before this finalizer of the "
                              "same garbage used the region (it was not closed)")
        return HeapClosed("the region's heap is closed")

    def _do(self, fn: Any, *args: Any) -> None:
        if self._region.words == ffi.NULL:
            raise self._stale()
        if self._heap._gone():
            raise self._heap_gone()
        rc = fn(self._region, *args)
        if rc == lib.HL_ECLOSED:
            raise self._heap_gone()
        if rc == lib.HL_ESTALE:
            raise self._stale()
        if rc:
            _raise(rc, "region word access failed")

    @property
    def heap(self) -> Heap:
        """The heap whose collector scans the region."""
        return self._heap

    @property
    def removed(self) -> bool:
        """True once the region keeps nothing alive any more: remove() ran (or
        it was never registered) or its heap closed.  Never raises (as the Lua
        binding's reg:removed())."""
        return self._region.words == ffi.NULL or self._heap._gone()

    def __len__(self) -> int:
        """The number of words; StaleRef once removed, HeapClosed once its
        heap is closed (as region[i])."""
        if self._region.words == ffi.NULL:
            raise self._stale()
        if self._heap._gone():
            raise self._heap_gone()
        return int(self._region.n)

    def _index(self, i: Any) -> int:
        i = _int("region index", i)
        n = len(self)
        j = i + n if i < 0 else i
        if not 0 <= j < n:
            raise IndexError(f"word {i} out of range for a region of {n} words")
        return j

    def _word(self, value: Any) -> Tuple[int, int]:
        """(the word, 0) for an int or None; (0, the handle) for a Ref: its
        object's address is read in C, with the heap held, as it is stored
        (hlpy_region_store) -- read here, a cycle of another thread
        could move the object before the store, and the word would hold its
        old address."""
        if value is None:
            return 0, 0
        if isinstance(value, Ref):
            if value._heap is not self._heap:
                raise InvalidArgument("a region word may hold an object of its own heap only")
            return 0, int(value._live()[1])   # (a released Ref: StaleRef)
        number = _as_int(value)
        if number is None:
            raise TypeError(f"a region word is an int, a Ref or None, not {_tname(value)}")
        value = number
        if not 0 <= value < 1 << 64:
            raise InvalidArgument(f"a region word is an unsigned 64-bit value, got {value}")
        return value, 0

    def _store(self, start: int, words: List[Tuple[int, int]]) -> None:
        values = ffi.new("uint64_t[]", [w for w, _ in words])
        refs = ffi.new("uint64_t[]", [r for _, r in words])
        # (no word is the bad one until the C side says so: a region removed
        # before the call left 0 here, and the error blamed word 0's Ref)
        bad = ffi.new("uint64_t *", 0xFFFFFFFFFFFFFFFF)
        try:
            self._do(lib.hlpy_region_store, start, values, refs, len(words), bad)
        except StaleRef:
            if bad[0] == 0xFFFFFFFFFFFFFFFF:
                raise
            raise StaleRef(f"word {start + bad[0]}: its Ref was released before the word was "
                           "stored (nothing was stored)") from None

    def __getitem__(self, i: int) -> int:
        j = self._index(i)
        out = ffi.new("uint64_t[1]")
        self._do(lib.hlpy_region_load, j, out, 1)
        return int(out[0])

    def __setitem__(self, i: int, value: _Word) -> None:
        j = self._index(i)
        self._store(j, [self._word(value)])

    def write(self, values: Iterable[_Word], start: int = 0) -> None:
        """Store values (ints, Refs or None) into the words from `start` on;
        nothing is stored if one is bad or they do not fit."""
        first = _u64("start", start, ("write", 0, len(self)))
        words = [self._word(v) for v in values]
        n = len(self)
        if first > n or len(words) > n - first:
            raise IndexError(f"{len(words)} words from word {first} do not fit a region of "
                             f"{n} words")
        if words:
            self._store(first, words)

    def words(self) -> List[int]:
        """Every word, as ints."""
        out = ffi.new("uint64_t[]", len(self))
        self._do(lib.hlpy_region_load, 0, out, len(self))
        return list(out)

    def __iter__(self) -> Iterator[int]:
        return iter(self.words())

    def scrub(self) -> None:
        """Zero every word: the region keeps nothing alive from now on."""
        self._do(lib.hlpy_region_scrub)

    def remove(self) -> None:
        """Unregister the region and free its words (idempotent; after the
        heap was closed it only frees them).  Done in C, as when the region
        dies (owners.h); a no-op on a region not made by a heap."""
        if self._has("_region"):
            lib.hlpy_region_remove(self._region)

    def __enter__(self) -> ConservativeRegion:
        self._do(lib.hlpy_region_load, 0, ffi.NULL, 0)
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    def __copy__(self) -> NoReturn:
        raise TypeError("a heaplab.ConservativeRegion cannot be copied: it owns a registered "
                        "root region (make another with Heap.conservative_region)")

    def __deepcopy__(self, memo: Any) -> NoReturn:
        self.__copy__()

    def __reduce_ex__(self, protocol: Any) -> NoReturn:
        raise TypeError("a heaplab.ConservativeRegion cannot be pickled: it is a root region of "
                        "a heap in this process")

    def _repr(self) -> str:
        if self._region.words == ffi.NULL:
            return (f"<heaplab.ConservativeRegion "
                    f"{'finalized' if self._finalized() else 'removed'}>")
        if self._heap._gone():
            return (f"<heaplab.ConservativeRegion of a "
                    f"{'finalized' if self._heap._finalized else 'closed'} heap>")
        nonzero = sum(1 for w in self.words() if w)
        return f"<heaplab.ConservativeRegion words={len(self)} nonzero={nonzero}>"


class Sampler(_Owned):
    """A C thread sampling this process's footprint every interval_s: the peak,
    the lowest value after mark(), and a time series.  Use as a context
    manager; summary() and series() can be read at any time, from any thread
    (stop() waits for them).

    The thread keeps interval_s for as long as it runs: every sample counts
    in the figures (samples, max_phys, min_phys_after_mark...), and
    summary()["interval_us"] is interval_s in microseconds.  Only the stored
    series thins out: once it holds `capacity` samples, every other one is
    dropped (the first is kept) and from then on one in 2, then 4, 8... of the
    thread's samples is stored, so it spans the whole run (each sample's t_ns
    says when); the samples of mark(), reset() and summary() are always
    stored.  Each sample reads /proc/self/smaps_rollup: about 0.6 ms of CPU
    with 100 MiB resident (15-25% of a core at 2 ms, as long as it runs),
    some 8 ms with 1 GiB (docs/harness.md)."""

    __slots__ = ()
    _what = "the sampler"

    def __init__(self, interval_s: float = 0.002, capacity: int = 65536) -> None:
        self._fresh()
        interval_s = _number("interval_s", interval_s)
        capacity = _i64("capacity", capacity,
                        ("sampler", lib.HL_SAMPLER_MIN_CAPACITY, lib.HL_SAMPLER_MAX_CAPACITY))
        slot = lib.hlpy_anchor_sampler_slot(self._anchored(1))
        rc = lib.hl_sampler_open(slot, interval_s, capacity)
        if rc:
            _raise(rc, _s(lib.hl_heap_error(ffi.NULL)))
        self._own(slot[0])

    def _closed_error(self) -> Error:
        if self._finalized:
            return Error("the sampler was finalized by a garbage collection: it is garbage, and "
                         "its thread was stopped before this finalizer of the same garbage used "
                         "it (it was not stopped by stop())")
        return Error("the sampler is stopped")

    def mark(self) -> None:
        """Start the 'after mark' window with a sample taken now."""
        self._run(lib.hl_sampler_mark)

    def reset(self) -> None:
        """Start a new phase with a sample taken now: the overall window
        (min/max) and the sample count restart, the 'after mark' window ends
        (mark_ns 0 until the next mark); the series is kept."""
        self._run(lib.hl_sampler_reset)

    def summary(self) -> Dict[str, int]:
        """The window's figures: samples, max_phys, min_phys, max_rss,
        min_phys_after_mark..., interval_us (the one asked for, never
        changed), stored (samples in the series) -- the names of
        hl_sampler_summary.  heaplab.Error
        (ESYS, naming the file and the reason) when no sample was taken
        because every read failed -- no descriptor left, no /proc."""
        o = ffi.new("hl_sampler_summary *")
        rc = self._run(lib.hl_sampler_summary_get, o)
        if rc:      # every read failed: no figures (heaplab.h)
            _raise(rc, _s(lib.hl_heap_error(ffi.NULL)))
        return {f: getattr(o, f) for f in _fields("hl_sampler_summary")}

    def series(self, start: int = 0) -> List[Tuple[int, int, int, int]]:
        """[(t_ns, phys_footprint, rss, lazyfree), ...] from stored sample `start` on."""
        start = _u64("start", start, ("series", 0, _U64_MAX))  # (past the end: no samples)
        out = []
        buf = ffi.new("hl_sample[]", 4096)
        n = ffi.new("size_t *")
        while True:
            self._run(lib.hl_sampler_read, start, buf, 4096, n)
            out.extend((buf[i].t_ns, buf[i].phys_footprint, buf[i].rss, buf[i].lazyfree)
                       for i in range(n[0]))
            if n[0] < 4096:
                return out
            start += n[0]

    def stop(self) -> None:
        """Stop the thread and free the sampler (idempotent)."""
        self.close()
