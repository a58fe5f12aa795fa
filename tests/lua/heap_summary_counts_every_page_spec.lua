-- tostring(heap) breaks its pages down by state, and the parts add up to
-- the total: every pool count the stats have that holds pages is named (the
-- line said "144 pages (5 owned, 0 partial, 0 free, 0 released)" while 139
-- were retired, and said nothing of pages whose restore failed).
local hl = require "heaplab"
local C = require "check"

-- The pool counts of the stats, each with its name on the line (the rare
-- ones only when there are some).
local POOLS = {
  { "owned_pages", "owned" }, { "retired_pool_pages", "retired" },
  { "partial_pool_pages", "partial" }, { "free_pool_pages", "free" },
  { "released_pool_pages", "released" },
  { "reuse_failed_pool_pages", "reuse_failed", rare = true },
  { "in_flight_pages", "in_flight", rare = true },
}

local function check_summary(h, what)
  local line = tostring(h)
  local total, inner = line:match("^heaplab%.heap%(%a+%): (%d+) pages %(([^)]*)%)")
  C.ok(total, what .. ": no page breakdown in " .. line)
  local shown, sum = {}, 0
  for n, name in inner:gmatch("(%d+) ([%a_]+)") do
    shown[name] = tonumber(n)
    sum = sum + tonumber(n)
  end
  C.eq(sum, tonumber(total), what .. ": the parts of " .. line)
  local st = h:stats()
  C.eq(tonumber(total), st.total_pages, what .. ": total_pages")
  for _, p in ipairs(POOLS) do
    local stat, name = p[1], p[2]
    if st[stat] > 0 or not p.rare then
      C.eq(shown[name], st[stat], what .. ": " .. name .. " in " .. line)
    else
      C.eq(shown[name], nil, what .. ": " .. name .. " (none) in " .. line)
    end
  end
  return st
end

describe("the heap's summary line", function()
  it("counts the retired pages of a fill", function()
    local h = assert(hl.heap{ warm_pages = 0 })
    local r = h:fill(4 << 20, 256)
    local st = check_summary(h, "after a fill")
    -- one of each in the singular (it said "1 handles, 1 cycles")
    C.eq(tostring(h):match("%), ([^,]+, [^,]+), live"),
         ("1 handle, %d cycle%s"):format(st.cycles, st.cycles == 1 and "" or "s"),
         "the handles and cycles of " .. tostring(h))
    C.ok(st.retired_pool_pages > 0, "the fill left retired pages")
    r:release()
    h:collect{ cycles = 2 }
    h:trim()
    st = check_summary(h, "after the release")
    C.ok(st.released_pool_pages > 0, "the trim released pages")
    h:close()
  end)

  it("counts the pages whose restore failed", function()
    local h = assert(hl.heap{ warm_pages = 0 })
    local r = h:fill(4 << 20, 256)
    r:release()
    h:collect{ cycles = 2 }
    h:trim()
    h:inject("restore", "always", 0, "EIO")
    local r2 = h:fill(4 << 20, 256)
    local st = check_summary(h, "after failed restores")
    C.ok(st.reuse_failed_pool_pages > 0, "restores failed: " .. tostring(h))
    C.ok(tostring(h):find(st.reuse_failed_pool_pages .. " reuse_failed", 1, true), tostring(h))
    r2:release()
    h:close()
  end)

  it("counts the pages of a manual heap", function()
    local h = assert(hl.heap{ mode = "manual" })
    check_summary(h, "a new manual heap")
    C.ok(tostring(h):find("^heaplab%.heap%(manual%)"), tostring(h))
    h:close()
  end)
end)
