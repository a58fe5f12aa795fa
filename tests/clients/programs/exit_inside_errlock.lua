-- exit() from a C SIGALRM handler (tests/clients/modules/exit_in_handler.c:
-- Lua has no FFI) that interrupted heaplab-lua inside its heap's errlock,
-- the heap's lock free: without /proc, heaplab.client's vma_count fails in
-- a loop, and each failure copies its message to the launcher's heap under
-- errlock.  With every mutex held 300 us longer (modules/slow_unlock.c,
-- preloaded into the launcher, armed here), the report at exit's own
-- vma_count failure waits for the errlock its own thread holds
-- (tests/clients/run.py lua_exit_inside_errlock).  lua5.4 exits 14 (no
-- heaplab.client there: the alarm interrupts an empty loop).
--   exit_inside_errlock.lua SECONDS
local m = require "exit_in_handler"
local ok, client = pcall(require, "heaplab.client")
m.slow_unlock()
m.arm(tonumber(arg[1]))
if not ok then
  while true do end
end
while true do
  assert(client.vma_count() == nil, "vma_count read a memory map: /proc is mounted")
end
