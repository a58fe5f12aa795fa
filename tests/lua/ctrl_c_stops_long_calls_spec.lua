-- Ctrl-C (SIGINT) stops a long call of the module -- a fill, a churn, a
-- collect of many cycles -- at its next safe point, in `lua5.4 script.lua`
-- and in the REPL, which survives (docs/lua.md, "Ctrl-C").  lua.c's own
-- handler only arms a hook, and a hook cannot cut a C call short: a 2 GiB
-- fill ran to its end (3.6 s) and a churn for its whole duration.  Each case
-- runs in a child lua5.4 that sends itself SIGINT 0.3 s into the call (the
-- busted process itself runs inside lua.c's handler).
local hl = require "heaplab"
local C = require "check"

local lua = os.getenv("HEAPLAB_LUA") or "lua5.4"

local function sh_quote(s) return "'" .. s:gsub("'", "'\\''") .. "'" end

-- (sleep in a background shell, then SIGINT to this process)
local KILL_LATER = [[os.execute("(sleep 0.3; kill -INT " .. hl.pid() .. ") &")]]

-- Run `code` with lua5.4 (args before it, stdin from `input`); returns
-- its output (stdout and stderr), its success and the wall time in s.
local function child(args, code, input)
  local t0 = hl.clock_ns()
  local cmd = sh_quote(lua) .. " " .. args .. " " .. (code and sh_quote(code) or "")
  if input then cmd = "printf '%s' " .. sh_quote(input) .. " | " .. cmd end
  local p = assert(io.popen(cmd .. " 2>&1"))
  local out = p:read("a")
  local ok = p:close()
  return out, ok, (hl.clock_ns() - t0) / 1e9
end

-- A script: SETUP, then CALL interrupted.  lua.c's hook raises
-- "interrupted!" as the inner pcall returns; the outer one catches it.
local function interrupted(setup, call, bound_s, handles)
  local code = ([[
local hl = require "heaplab"
local h = assert(hl.heap{})
%s
%s
local t0 = hl.clock_ns()
local ok, err = pcall(function() pcall(function() return %s end) end)
local s = (hl.clock_ns() - t0) / 1e9
h:collect()
print(("err=%%s elapsed=%%.2f handles=%%d"):format(err, s, h:stats().handles))
]]):format(setup, KILL_LATER, call)
  local out, ok = child("-e", code)
  C.ok(ok, call .. ": the script failed: " .. out)
  local err, s, n = out:match("err=(.-) elapsed=([%d.]+) handles=(%d+)")
  C.ok(err, call .. ": no result line: " .. out)
  C.ok(err:find("interrupted", 1, true), call .. ": not interrupted: " .. out)
  C.ok(tonumber(s) < bound_s, ("%s: ran %.2f s after Ctrl-C at 0.3 s (bound %.1f s)"):format(
    call, tonumber(s), bound_s))
  C.eq(tonumber(n), handles, call .. ": handles left")
end

describe("Ctrl-C", function()
  it("stops a fill at once, and no handle is made", function()
    interrupted("", "h:fill(2 << 30, 256)", 1.5, 0)
  end)

  it("stops a churn before its duration", function()
    interrupted("", "h:churn(20, 256, 1 << 20)", 3, 0)
  end)

  it("stops a collect of many cycles between two cycles", function()
    interrupted("local r = h:fill(64 << 20, 64)", "h:collect(2000)", 3, 1)
  end)

  it("stops a fill in the REPL, which goes on", function()
    local input = "hl = require 'heaplab'; h = hl.heap{}; " .. KILL_LATER .. "\n"
      .. "r = h:fill(2 << 30, 256)\n"
      .. "print('after', r, h:stats().handles)\n"
      .. "r = h:fill(1 << 20, 256); print('again', #r)\n"
    local out, ok, s = child("-i", nil, input)
    C.ok(ok, "the REPL failed: " .. out)
    C.ok(out:find("interrupted", 1, true), "not interrupted: " .. out)
    C.ok(out:find("after\tnil\t0\n", 1, true), "a handle was left, or the REPL ended: " .. out)
    C.ok(out:find("again\t%d+\n"), "the next fill did not run: " .. out)
    C.ok(s < 2.5, ("the REPL took %.2f s"):format(s))
  end)

  it("ends a paced h:alloc's wait, and the heap goes on", function()
    -- h:alloc is no long call (no handler put in front around each one: that
    -- cost sigactions per allocation); the heap's wait hook puts it in front
    -- for a paced wait alone.  Without it Ctrl-C waited for the wait's end:
    -- the next cycle, 4 s after the last one (min_cycle_interval_ms), here
    -- ~3.7 s after the signal.  The loop's first allocation asks for a cycle
    -- that runs at once; from the second on each waits ~4 s for the next, so
    -- at 0.3 s the loop waits (and were it not waiting, lua.c's hook would
    -- stop the Lua loop at once: the bound holds either way).
    local code = ([[
local hl = require "heaplab"
local h = assert(hl.heap{ collector = "background", min_cycle_interval_ms = 4000,
  pacing_max_wait_ms = 8000, large_trigger_bytes = "64k", pacing_give_up_cycles = 1000 })
%s
local t0 = hl.clock_ns()
local ok, err = pcall(function()
  local keep = {}
  for i = 1, 1000 do keep[i %% 8] = h:alloc(100000) end
end)
local s = (hl.clock_ns() - t0) / 1e9
local st = h:stats()
local o = h:alloc(100)
print(("err=%%s elapsed=%%.2f waits=%%d check=%%s alloc=%%s"):format(err, s, st.pacing_waits,
  tostring(h:check()), tostring(o ~= nil)))
]]):format(KILL_LATER)
    local out, ok = child("-e", code)
    C.ok(ok, "the script failed: " .. out)
    local err, s, waits, check, alloc =
      out:match("err=(.-) elapsed=([%d.]+) waits=(%d+) check=(%w+) alloc=(%w+)")
    C.ok(err, "no result line: " .. out)
    C.ok(err:find("interrupted", 1, true), "not interrupted: " .. out)
    C.ok(tonumber(waits) >= 1, "no paced wait: " .. out)
    C.ok(tonumber(s) < 1.3, ("the paced h:alloc loop ran %.2f s, Ctrl-C at 0.3 s (its wait: ~4 s)")
      :format(tonumber(s)))
    C.eq(check, "true", "h:check() after")
    C.eq(alloc, "true", "an allocation after")
  end)

  it("leaves the handler lua.c had: Ctrl-C in Lua code after a fill", function()
    -- a fill that ends before the signal, then a Lua loop: lua.c's handler
    -- (put back after the fill) stops the loop
    local code = [[
local hl = require "heaplab"
local h = assert(hl.heap{})
local r = h:fill(1 << 20, 64)
]] .. KILL_LATER .. [[

local ok, err = pcall(function() while true do end end)
print("loop", err)
]]
    local out, ok = child("-e", code)
    C.ok(ok, "the script failed: " .. out)
    C.ok(out:find("loop\t.*interrupted!"), "the Lua loop was not interrupted: " .. out)
  end)
end)
