-- A C SIGALRM handler calling exit(14) (tests/clients/modules/
-- exit_in_handler.c: Lua has no FFI), armed, then work it interrupts:
--   exit_in_handler.lua heap SECONDS        strings: heaplab-lua's
--                                           allocations, inside its heap
--   exit_in_handler.lua THREADS SECONDS     glibc's own malloc and free in C
--                                           on THREADS threads
-- lua5.4 exits 14.  (tests/clients/run.py lua_exit_in_signal_handler)
local m = require "exit_in_handler"
local mode, delay = arg[1], tonumber(arg[2])
m.arm(delay)
if mode == "heap" then
  -- (a string grown a byte at a time: an allocation and a free each step,
  -- so the alarm often lands inside the heap -- 16 of 30 runs hung without
  -- the busy check, 2 of 30 with tables of short strings)
  local keep, i = {}, 0
  while true do
    local s = ""
    for _ = 1, 100 do s = s .. "x" end
    keep[i % 256 + 1] = s
    i = i + 1
  end
else
  m.glibc_churn(math.tointeger(tonumber(mode)))
end
