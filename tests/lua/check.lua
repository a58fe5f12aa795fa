-- check.lua -- the few assertions the Lua tests share (require "check").
local M = {}

M.MiB = 1 << 20

-- Run f(...) under pcall; it must fail with a string error containing every
-- plain-text fragment in `want` (function name, argument, what was wrong).
-- The fragments are looked for after the position luaL_error puts in front
-- ("/path/to/closed_heap_invalidates_handles_spec.lua:55: "): a fragment
-- the spec's own file name holds matched whatever the message said -- the
-- closed heap's "closed", with the module's check removed (mutant
-- lua-closed-heap-reaches-c, session 37: "h:stats: EINVAL (EINVAL)" passed).
-- Returns the message.
function M.raises(want, f, ...)
  local ok, err = pcall(f, ...)
  if ok then
    error(("expected an error containing %q, got success"):format(table.concat(want, " ... ")), 2)
  end
  if type(err) ~= "string" then
    error(("expected a string error, got %s"):format(type(err)), 2)
  end
  local said = err:gsub("^[^\n]-%.lua:%d+: ", "", 1)
  for _, frag in ipairs(want) do
    if not said:find(frag, 1, true) then
      error(("error %q does not mention %q"):format(err, frag), 2)
    end
  end
  return err
end

function M.eq(a, b, what)
  if a ~= b then
    error(("%s: expected %s, got %s"):format(what or "value", tostring(b), tostring(a)), 2)
  end
end

function M.ok(cond, what)
  if not cond then error(what or "assertion failed", 2) end
end

-- Collect Lua garbage until finalizers have run (two full cycles: the first
-- calls __gc, the second frees what the finalizers released).
function M.lua_gc()
  collectgarbage("collect")
  collectgarbage("collect")
end

-- A number of this process's /proc/self/status ("Threads", "VmSize" in kB).
-- Reading it allocates a little.
function M.status(field)
  local f = assert(io.open("/proc/self/status"))
  local st = f:read("a")
  f:close()
  return tonumber(st:match(field .. ":%s*(%d+)"))
end

return M
