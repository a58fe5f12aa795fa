-- h:events() consumes exactly the events it returns: a call that raises
-- while it builds its result ("not enough memory" from the allocator, or any
-- error) consumes none, and a read made meanwhile (from a finalizer or a
-- metamethod) takes its events once.  The binding consumed before building:
-- a failing lua_Alloc lost every event ("had 11, left 0", the Lua hunt of
-- session 28).  Here the building is made to raise through the event
-- metatable's __newindex (the tables' fields are set with lua_setfield,
-- which honours it), which a failing allocation does the same way.
local hl = require "heaplab"
local C = require "check"

local function heap_with_events()
  local h = assert(hl.heap{ events_capacity = 256 })
  for _ = 1, 5 do h:collect() end
  local n = #h:events(false)
  C.ok(n >= 5, "events recorded: " .. n)
  return h, n
end

describe("h:events", function()
  it("consumes nothing when building its result raises", function()
    local h, n = heap_with_events()
    local mt = getmetatable(h:events(false)[1])
    local calls = 0
    mt.__newindex = function(t, k, v)
      calls = calls + 1
      if calls == 7 then error("refused while building") end
      rawset(t, k, v)
    end
    local ok, err = pcall(h.events, h)
    mt.__newindex = nil
    C.ok(not ok and tostring(err):find("refused while building", 1, true), tostring(err))
    C.eq(#h:events(false), n, "events left after the failed read")
    local all = h:events()
    C.eq(#all, n, "the next read returns them")
    C.eq(all[1].kind, "heap_created", "the first event")
    C.eq(#h:events(false), 0, "and consumes them")
    h:close()
  end)

  it("returns each event once when a read runs during another", function()
    local h, n = heap_with_events()
    local mt = getmetatable(h:events(false)[1])
    local inner, once = nil, true
    mt.__newindex = function(t, k, v)
      if once then
        once = false
        inner = h:events() -- (this one's own tables go through here too)
      end
      rawset(t, k, v)
    end
    local outer = h:events()
    mt.__newindex = nil
    C.eq(#inner + #outer, n, ("events returned: %d inside, %d outside"):format(#inner, #outer))
    C.eq(#h:events(false), 0, "events left")
    h:close()
  end)

  it("leaves the events appended while it builds its result", function()
    local h, n = heap_with_events()
    local mt = getmetatable(h:events(false)[1])
    local once = true
    mt.__newindex = function(t, k, v)
      if once then
        once = false
        h:collect() -- appends this cycle's events behind the ones being read
      end
      rawset(t, k, v)
    end
    local got = h:events()
    mt.__newindex = nil
    C.eq(#got, n, "the events read")
    local later = h:events()
    C.ok(#later >= 1, "the events the collect appended are left for the next read")
    C.eq(later[#later].kind, "cycle", "the last of them")
    C.ok(later[1].time_ns >= got[#got].time_ns, "and they come after")
    h:close()
  end)

  -- (its buffer: 64 events, four times larger while it comes back full, up
  -- to events_capacity -- one of the whole capacity at each call, 104 MiB at
  -- the largest, failed with "not enough memory" under heaplab-lua's
  -- HEAPLAB_HEAP_LIMIT_BYTES=64m: the Lua hunt of session 36)
  it("takes a buffer as large as the events pending, not the ring's capacity", function()
    local h = assert(hl.heap{ events_capacity = 1048576 })
    h:collect()
    collectgarbage("collect")
    collectgarbage("stop")
    local before = collectgarbage("count")
    local got = h:events()
    local grew = collectgarbage("count") - before
    collectgarbage("restart")
    C.ok(#got >= 1, "events returned: " .. #got)
    C.ok(grew < 256, ("Lua's heap grew %.0f KiB for %d events"):format(grew, #got))
    h:close()
  end)

  it("returns every pending event, in order, past its first buffer", function()
    local h = assert(hl.heap{ events_capacity = 4096 })
    for _ = 1, 400 do h:collect() end
    local peeked = h:events(false)
    C.ok(#peeked > 4 * 64, "events recorded: " .. #peeked)
    local all = h:events()
    C.eq(#all, #peeked, "the read returns them all")
    for i = 2, #all do
      if all[i].time_ns < all[i - 1].time_ns then C.ok(false, "out of order at " .. i) end
    end
    C.eq(all[#all].kind, "cycle", "the last")
    C.eq(#h:events(false), 0, "and consumes them")
    h:close()
  end)
end)
