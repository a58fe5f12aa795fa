"""python -m heaplab COMMAND

  options            the option table (name, default, range, description)
  stats              the names and meaning of every counter
  version            the library version
"""
import sys

import heaplab
from heaplab._heaplab import ffi, lib


def _options():
    for name, o in heaplab.options().items():
        rng = "|".join(o["choices"]) if o["choices"] else f"[{o['min']}, {o['max']}]"
        print(f"{name:26} {str(o['default']):>12}  {rng:28} {o['description']}")


def _stats():
    for i in range(lib.hl_stat_count()):
        print(f"{ffi.string(lib.hl_stat_name(i)).decode():26} "
              f"{ffi.string(lib.hl_stat_description(i)).decode()}")


def main(argv):
    cmds = {"options": _options, "stats": _stats, "version": lambda: print(heaplab.__version__)}
    if len(argv) < 1 or argv[0] not in cmds:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    cmds[argv[0]]()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
