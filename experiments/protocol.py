"""Every experiment's protocol variables: the figures the environment may
override (the notebooks and sweeps run smaller arms), each with the range
that keeps its experiment's effect measurable (docs/harness.md, *Protocol
variables*).  One checker reads them all (heaplab.harness.ProtocolVariable):
when the test or the arm runs, not when the module is imported -- a bad
value is an error naming the variable, its value and the range, raised by
the test that uses it (it used to abort the collection of the whole suite,
naming nothing).  The Python experiments, their Lua twins' runner
(test_lua_experiments.py) and the real-program experiments take them from
here; each arm's JSON records the values it ran with (params["protocol"]).
"""
from heaplab.harness import ProtocolVariable

# (E1, E10: the warm cache -- 64 pages of 64 KiB, 4 MiB -- stays resident
# in every arm that releases; below 16 MiB it is most of the fill, and "the
# dropped footprint, warm cache aside" nothing)
E1_FILL_MIB = ProtocolVariable("HEAPLAB_E1_FILL_MIB", 192, 16, 4096, "MiB",
                               why="the fill must dwarf the 4 MiB warm cache")
E1_TEXTURES_MIB = ProtocolVariable("HEAPLAB_E1_TEXTURES_MIB", 192, 8, 4096, "MiB",
                                   why="at least 8 textures of 1 MiB")
E2_FILL_MIB = ProtocolVariable("HEAPLAB_E2_FILL_MIB", 240, 16, 4096, "MiB",
                               why="partial pages enough for a major sweep to show")
E2_CHURN_S = ProtocolVariable("HEAPLAB_E2_CHURN_S", 4.0, 0.5, 600, "s",
                              why="enough cycles to count major sweeps in")
E3_SECONDS = ProtocolVariable("HEAPLAB_E3_SECONDS", 2.5, 0.5, 600, "s",
                              why="enough churn for the growth to show")
E7_STRUCT_MIB = ProtocolVariable("HEAPLAB_E7_STRUCT_MIB", 64, 8, 4096, "MiB",
                                 why="a structure that dwarfs the warm cache")
E8_MIB = ProtocolVariable("HEAPLAB_E8_MIB", 192, 16, 4096, "MiB", integer=True,
                          why="the interpreter's objects must dwarf its own footprint")
E9_KEYS = ProtocolVariable("HEAPLAB_E9_KEYS", 2_000_000, 10_000, 20_000_000, "keys",
                           integer=True, why="the keys must dwarf the server's own footprint")
E10_FILL_MIB = ProtocolVariable("HEAPLAB_E10_FILL_MIB", 192, 32, 4096, "MiB",
                                why="the fill must dwarf the 4 MiB warm cache")
E10_N = ProtocolVariable("HEAPLAB_E10_N", (10, 100, 1000), 2, 100_000, integer=True, many=True,
                         why="keep 1 in N: N >= 2 drops something")
E10_OBJECTS = ProtocolVariable("HEAPLAB_E10_OBJECTS", 1_500_000, 100_000, 50_000_000, "objects",
                               integer=True, why="enough objects for 1 in 1000 to survive")

#: the variables each Lua experiment script reads (experiments/lua/*.lua), as
#: its Python twin does
LUA = {
    "e1_page_floor.lua": (E1_FILL_MIB, E1_TEXTURES_MIB),
    "e10_sparse_survivors.lua": (E10_FILL_MIB,),
}
