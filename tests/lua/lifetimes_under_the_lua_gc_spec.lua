-- The Lua collector and heaplab's lifetimes (issue 16, defects 2 and 16).
local hl = require "heaplab"
local C = require "check"

describe("a heap closed by a finalizer during one of its calls", function()
  it("is an error in the call, never a use after free", function()
    -- an aggressive collector: a finalizer may run at any allocation, and
    -- this one closes the heap whose method is running
    collectgarbage("incremental", 1, 1000, 0)
    local closed_in_call = 0
    for round = 1, 60 do
      local h = hl.heap{ reserve_bytes = "64m" }
      local o = assert(h:alloc(64, 2))
      o[1] = assert(h:alloc(8))
      local s = hl.sampler(0.01)
      setmetatable({}, { __gc = function() h:close(); s:stop() end })
      for i = 1, 50 do
        local calls = {
          function() return h:alloc(64) end, function() return h:fill(4096, 64) end,
          function() return h:events() end, function() return o:dup() end,
          function() return o[1] end, function() return o:read() end,
          function() return s:series() end,
        }
        local ok, err = pcall(calls[(i % #calls) + 1])
        if not ok then
          C.ok(tostring(err):find("closed") or tostring(err):find("stopped")
               or tostring(err):find("released"), "the error says why: " .. tostring(err))
          closed_in_call = closed_in_call + 1
        end
      end
      h:close()
      s:stop()
    end
    collectgarbage("incremental", 200, 100, 13)
    C.ok(closed_in_call > 0, "finalizers closed heaps during calls: " .. closed_in_call)
  end)
end)

describe("heaps Lua drops", function()
  it("are collected without collectgarbage(): Lua is told what a heap costs", function()
    collectgarbage()
    local alive = setmetatable({}, { __mode = "k" })
    for i = 1, 3000 do
      local h = hl.heap{}
      alive[h] = true
      local o = h:alloc(64)
    end
    local n = 0
    for h in pairs(alive) do if not h:closed() then n = n + 1 end end
    C.ok(n < 1000, "heaps still open without a collectgarbage(): " .. n .. " of 3000")
  end)
end)

-- threads of this process now (/proc/self/status; reading it allocates a
-- little, so the loop below reads it only every 50 samplers)
local function threads() return C.status("Threads") end

describe("samplers Lua drops", function()
  it("are stopped without collectgarbage(): Lua is told what a sampler costs", function()
    C.lua_gc()
    local base, most = threads(), 0
    for i = 1, 200 do
      local s = hl.sampler(10) -- (idle threads: a count, not a load)
      if i % 50 == 0 then most = math.max(most, threads() - base) end
    end
    C.lua_gc()
    -- each one stopped at its __gc: before, ~200 threads ran until collectgarbage()
    C.ok(most <= 8, "sampler threads still running without a collectgarbage(): " .. most
         .. " of 200")
  end)
end)

describe("a stopped collector", function()
  it("is not run by heaplab.heap{} or heaplab.sampler()", function()
    -- each steps the collector as if its cost had been allocated; a step
    -- ran a collector the program had stopped (LUA_GCSTEP restarts it for
    -- the step), finalizers included, where an allocation never does
    collectgarbage(); collectgarbage()
    collectgarbage("stop")
    local ran = 0
    for _ = 1, 50 do setmetatable({}, { __gc = function() ran = ran + 1 end }) end
    for _ = 1, 10 do
      hl.heap{ reserve_bytes = "64m" }:close()
      hl.sampler(0.01, 16):stop()
    end
    local while_stopped = ran .. " " .. tostring(collectgarbage("isrunning"))
    collectgarbage("restart")
    collectgarbage(); collectgarbage()
    C.eq(while_stopped, "0 false", "finalizers run while stopped, running")
    C.eq(ran, 50, "finalizers run once restarted")
  end)
end)
