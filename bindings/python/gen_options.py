"""Generate heaplab/_options.py from the option table in the one public header.

The options are declared once, as the HL_OPTIONS X-macro of
core/include/heaplab.h: X(name, kind, heaps, default, min, max, choices, description).
Like gen_cffi.py, this runs the header through the C preprocessor (with
HL_CDEF, so no system header is read) and expands that list with an X of its
own that prints each entry as a Python tuple.  From it comes a module with

    HeapOptions   a TypedDict (total=False): the keyword arguments of
                  heaplab.Heap with their types, for type checkers
                  (Heap.__init__(self, **options: Unpack[HeapOptions]));
    OPTION_TABLE  (name, kind, default, min, max, choices, description) per
                  option, which heaplab uses for Heap's signature and
                  docstring (what help(heaplab.Heap) shows);
    Footprint, ChurnResult
                  typed NamedTuples with the fields of the C structs
                  hl_footprint and hl_churn_result (read with CFFI from the
                  same preprocessed header), for type checkers: at run time
                  heaplab builds the same tuples from its compiled module.

Meson runs this at build time (bindings/python/meson.build); nothing in the
output is written by hand.

usage: gen_options.py CC HEADER OUT_PY
"""
import ast
import os
import shlex
import subprocess
import sys
import tempfile

ENTRY = "X(name, kind, heaps, default, min, max, choices, description)"
KINDS = {"BOOL": "bool", "INT": "int", "BYTES": "bytes", "ENUM": "enum"}
# Python types of a value the binding accepts for each kind (a string is
# parsed by the C library for every kind: "64k", "true"; the typed form names
# the usual one, and strings where they are the documented way).
TYPES = {"bool": "bool", "int": "int", "bytes": "Union[int, str]"}


def _number(text, what):
    """An integer constant expression of the header (65536, 64 << 20, -1)."""
    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            v = ev(node.operand)
            return -v if isinstance(node.op, ast.USub) else v
        ops = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b,
               ast.Mult: lambda a, b: a * b, ast.LShift: lambda a, b: a << b,
               ast.FloorDiv: lambda a, b: a // b}
        if isinstance(node, ast.BinOp) and type(node.op) in ops:
            return ops[type(node.op)](ev(node.left), ev(node.right))
        raise ValueError(text)
    cleaned = text.replace("/", "//").replace("LL", "").replace("ULL", "").rstrip("uUlL")
    try:
        return ev(ast.parse(cleaned, mode="eval"))
    except (SyntaxError, ValueError):
        raise SystemExit(f"gen_options.py: {what} = {text!r} is not an integer constant; "
                         "extend _number() in bindings/python/gen_options.py") from None


def _choice_index(text, names, what):
    """The index of an enum constant (HL_<PREFIX>_<TOKEN>) among its option's
    choices, or an integer constant."""
    for i, token in enumerate(names):
        if text.startswith("HL_") and text.endswith("_" + token.upper()):
            return i
    return _number(text, what)


def read_options(cc, header):
    """The entries of HL_OPTIONS, as (name, kind, default, min, max, choices,
    description) with numbers as ints and the default of an enum as its name."""
    src = (f'#include "{os.path.abspath(header)}"\n'
           "#define HL__PY(name, kind, heaps, def, lo, hi, choices, desc) "
           "(#name, #kind, #heaps, #def, #lo, #hi, choices, desc),\n"
           "HEAPLAB_OPTIONS_BEGIN HL_OPTIONS(HL__PY) HEAPLAB_OPTIONS_END\n")
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
        f.write(src)
        path = f.name
    try:
        cmd = shlex.split(cc) + ["-E", "-P", "-DHL_CDEF", "-x", "c", path]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(path)
    try:
        body = out.split("HEAPLAB_OPTIONS_BEGIN", 1)[1].split("HEAPLAB_OPTIONS_END", 1)[0]
        entries = ast.literal_eval("[" + body + "]")
    except (IndexError, SyntaxError, ValueError) as e:
        raise SystemExit(f"gen_options.py: cannot read HL_OPTIONS from {header} ({e}); "
                         f"its entries must be {ENTRY}") from None
    table = []
    for e in entries:
        if len(e) != 8:
            raise SystemExit(f"gen_options.py: HL_OPTIONS entry {e[:1]} has {len(e)} fields; "
                             f"expected {ENTRY}")
        name, kind, heaps, default, lo, hi, choices, desc = e
        if heaps not in ("ALL", "COLLECTED"):
            raise SystemExit(f"gen_options.py: option {name}: heaps is {heaps!r}; expected ALL "
                             "or COLLECTED")
        if kind not in KINDS:
            raise SystemExit(f"gen_options.py: option {name}: unknown kind {kind!r} "
                             f"(known: {', '.join(KINDS)})")
        kind = KINDS[kind]
        names = tuple(choices.split(",")) if kind == "enum" else ()
        if kind == "enum":
            # an enum's default, min and max are its constants (HL_ORDER_FIFO):
            # HL_CHOICES_<option> numbers them in the order of the choices
            default, lo, hi = (_choice_index(v, names, f"{name} {what}")
                               for v, what in ((default, "default"), (lo, "min"), (hi, "max")))
        else:
            default = _number(default, f"{name} default")
            lo, hi = _number(lo, f"{name} min"), _number(hi, f"{name} max")
        if kind == "enum":
            if not 0 <= default < len(names):
                raise SystemExit(f"gen_options.py: option {name}: default {default} is not "
                                 f"an index of its choices {names}")
            default = names[default]
        elif kind == "bool":
            default = bool(default)
        table.append((name, kind, default, lo, hi, names, " ".join(desc.split())))
    if not table:
        raise SystemExit(f"gen_options.py: HL_OPTIONS in {header} is empty")
    return table


# C structs returned to Python as named tuples: (class, struct, docstring)
RECORDS = (
    ("Footprint", "hl_footprint", "Bytes charged to this process (Linux: /proc/self/smaps_rollup)."),
    ("ChurnResult", "hl_churn_result",
     "What Heap.churn() did: bytes and objects allocated, cycles, pacing."),
)


def read_records(cc, header):
    """{struct: [(field, python type), ...]} of the RECORDS structs."""
    import cffi
    cmd = shlex.split(cc) + ["-E", "-P", "-DHL_CDEF", "-x", "c", header]
    cdef = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    out = {}
    for _, struct, _ in RECORDS:
        fields = []
        for name, field in ffi.typeof(struct).fields:
            kind = field.type.kind
            cname = field.type.cname
            if kind == "primitive" and cname in ("float", "double"):
                fields.append((name, "float"))
            elif kind == "primitive":
                fields.append((name, "int"))
            else:
                raise SystemExit(f"gen_options.py: {struct}.{name} is a {cname}; "
                                 "only numbers are returned as named-tuple fields")
        out[struct] = fields
    return out


def type_of(kind, choices):
    if kind == "enum":
        return "Literal[" + ", ".join(repr(c) for c in choices) + "]"
    return TYPES[kind]


def allowed(kind, lo, hi, choices):
    if kind == "enum":
        return "one of " + ", ".join(repr(c) for c in choices)
    if kind == "bool":
        return "True or False"
    rng = f"{lo}..{hi}"
    return rng + (" bytes; a string may use k/m/g/t suffixes (KiB...)" if kind == "bytes" else "")


def render(table, records, header):
    lines = [
        '"""heaplab\'s options: the keyword arguments of heaplab.Heap.',
        "",
        "GENERATED at build time by bindings/python/gen_options.py from the HL_OPTIONS",
        f"list of {os.path.basename(header)} -- do not edit; change the header.",
        '"""',
        "from typing import Literal, NamedTuple, Tuple, TypedDict, Union",
        "",
        '__all__ = ["HeapOptions", "OPTION_TABLE", ' + ", ".join(repr(r[0]) for r in RECORDS) + "]",
        "",
        "",
        "class HeapOptions(TypedDict, total=False):",
        '    """The options heaplab.Heap(**options) takes, with their types.  A',
        "    string is accepted for every option at run time and parsed by the C",
        '    library (HEAPLAB_<NAME> environment variables use the same syntax)."""',
        "",
    ]
    for name, kind, default, lo, hi, choices, desc in table:
        lines.append(f"    {name}: {type_of(kind, choices)}")
        doc = f"{desc} (default {default!r}; {allowed(kind, lo, hi, choices)})"
        lines.append(f"    {doc!r}")
        lines.append("")
    lines += [
        "",
        "#: (name, kind, default, min, max, choices, description) of every option, in the",
        "#: header's order; kind is bool, int, bytes or enum.",
        "OPTION_TABLE: Tuple[Tuple[str, str, Union[bool, int, str], int, int, Tuple[str, ...], str],"
        " ...] = (",
    ]
    for row in table:
        lines.append(f"    {row!r},")
    lines.append(")")
    for cls, struct, doc in RECORDS:
        lines += ["", "", f"class {cls}(NamedTuple):", f"    {doc!r}", ""]
        lines += [f"    {name}: {typ}" for name, typ in records[struct]]
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 4:
        raise SystemExit("usage: gen_options.py CC HEADER OUT_PY")
    cc, header, out_py = sys.argv[1:4]
    text = render(read_options(cc, header), read_records(cc, header), header)
    with open(out_py, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
