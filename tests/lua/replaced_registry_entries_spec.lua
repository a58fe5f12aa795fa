-- The module's registry entries -- its metatables under their names
-- ("heaplab.heap", ...) and the regions' owners table -- are reachable through
-- debug.getregistry().  Replaced (nil, a number, a table of someone else's),
-- each is made again as it is next needed: before, the next heaplab.heap{}
-- or h:conservative_region() used the value as a table and crashed (the Lua
-- hunt of session 28, reg.lua).  Every case runs in this process: a crash
-- fails the spec file.
local hl = require "heaplab"
local C = require "check"

local R = debug.getregistry()
local NAMES = { "heaplab.heap", "heaplab.object", "heaplab.region", "heaplab.sampler",
                "heaplab.stats", "heaplab.events", "heaplab.event", "heaplab.footprint",
                -- the returned tables given a tostring in session 31
                "heaplab.summary", "heaplab.series", "heaplab.churn",
                "heaplab.effective_options", "heaplab.options", "heaplab.option",
                "heaplab.faults", "heaplab.fault" }

-- everything that sets one of the metatables, and what each shows
local function use_everything()
  local h = assert(hl.heap{})
  local o = assert(h:alloc(8, 1))
  local r = assert(h:conservative_region(2))
  local s = assert(hl.sampler())
  local shown = {
    ["heaplab.summary"] = s:summary(), ["heaplab.series"] = s:series(),
    ["heaplab.churn"] = h:churn(0.001, 16, 1024),
    ["heaplab.effective_options"] = h:options(), ["heaplab.options"] = hl.options(),
    ["heaplab.option"] = hl.options().major_sweep,
    ["heaplab.faults"] = h:faults(), ["heaplab.fault"] = h:faults().restore,
  }
  s:stop()
  for name, t in pairs(shown) do
    C.ok(tostring(t):find("^" .. name:gsub("%.", "%%.") .. "[: ]"), tostring(t))
  end
  local st, ev, fp = assert(h:stats()), assert(h:events()), assert(hl.footprint())
  C.ok(tostring(h):find("^heaplab.heap%(collected%)"), tostring(h))
  C.ok(tostring(o):find("^heaplab.object"), tostring(o))
  C.ok(tostring(st):find("^heaplab.stats"), tostring(st))
  C.ok(tostring(ev):find("^heaplab.events"), tostring(ev))
  C.ok(tostring(ev[1]):find("^heaplab.event"), tostring(ev[1]))
  C.ok(tostring(fp):find("^heaplab.footprint"), tostring(fp))
  C.eq(tostring(r), "heaplab.region(words=2, nonzero=0)", "tostring(region)")
  C.eq(#o, 1, "#o")
  r:remove()
  o:release()
  h:close()
end

describe("a registry entry of the module replaced", function()
  for _, value in ipairs({ "nil", "42", "{}", "{ __name = 'heaplab.other' }" }) do
    it("metatables set to " .. value .. " are made again", function()
      for _, name in ipairs(NAMES) do
        R[name] = load("return " .. value)()
        use_everything()
        C.eq(type(R[name]), "table", name .. " made again")
        C.eq(R[name].__name, name, name .. "'s __name")
      end
    end)
  end

  it("values made before keep their metatable and their finalizer", function()
    local h = assert(hl.heap{})
    local o = assert(h:alloc(8))
    R["heaplab.object"] = 42
    R["heaplab.heap"] = nil
    C.eq(#h:alloc(8, 3), 3, "a handle made with the new metatable")
    o = nil
    C.lua_gc()
    h:collect()
    C.eq(h:stats().handles, 0, "handles after Lua's GC: the old one's __gc ran")
    h:close()
  end)

  it("the regions' owners table set to nil, a number or a proxy", function()
    local owners
    for k, v in pairs(R) do
      if type(k) == "userdata" and type(v) == "table" and getmetatable(v)
         and getmetatable(v).__mode == "k" then owners = k end
    end
    C.ok(owners, "the owners table found")
    for _, value in ipairs({ "nil", "42", "setmetatable({}, { __newindex = error })" }) do
      R[owners] = load("return " .. value)()
      local h = assert(hl.heap{})
      local r = assert(h:conservative_region(4))
      C.eq(tostring(r), "heaplab.region(words=4, nonzero=0)", value)
      r = nil
      C.lua_gc()
      r = assert(h:conservative_region(4))
      r:remove()
      h:close()
    end
  end)

  it("require made again after the entries were replaced", function()
    for _, name in ipairs(NAMES) do R[name] = 42 end
    package.loaded.heaplab = nil
    local hl2 = require "heaplab"
    for _, name in ipairs(NAMES) do C.eq(type(R[name]), "table", name) end
    C.eq(#assert(assert(hl2.heap{}):alloc(8, 2)), 2, "a handle of the module loaded again")
  end)
end)
