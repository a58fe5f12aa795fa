"""Every global symbol libheaplab defines is hl_-prefixed (hl_ the API, hl__
the layers' internals): in the static archive (-Ddefault_library=both
installs it) a program is linked with every object it pulls in, and the 31
prim_* functions of the OS layer clashed with a program's own names (the
embedding hunt, session 28).  Args: the static library, the shared library."""
import subprocess
import sys


def defined_globals(path, dynamic):
    args = ["nm", "-g", "--defined-only"] + (["-D"] if dynamic else []) + [path]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    return sorted({line.split()[-1] for line in out.splitlines()
                   if len(line.split()) == 3})


def main():
    bad = {}
    for path, dynamic in ((sys.argv[1], False), (sys.argv[2], True)):
        names = defined_globals(path, dynamic)
        assert names, f"nm found no symbol in {path}"
        # (an ASan build adds __odr_asan.<name> beside each global it instruments)
        others = [n for n in names if not n.removeprefix("__odr_asan.").startswith("hl_")]
        if others:
            bad[path] = others
    for path, names in bad.items():
        print(f"{path}: {len(names)} global symbols outside hl_: {' '.join(names)}")
    if bad:
        print("prefix them hl__ (internal) or make them static")
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
