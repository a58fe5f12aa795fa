-- A busted spec of ours: the parts of Lua 5.4 that allocate, free and
-- resize the most -- strings, tables, closures, coroutines, finalizers,
-- weak tables, to-be-closed variables, load -- checked for results that do
-- not depend on the allocator underneath.
describe("strings", function()
  it("concatenates, repeats and formats", function()
    local parts = {}
    for i = 1, 2000 do parts[#parts + 1] = string.format("%05d:%s", i, ("x"):rep(i % 17)) end
    local s = table.concat(parts, ",")
    assert.are.equal(2000, select(2, s:gsub(",", ",")) + 1)
    assert.are.equal("00007:xxxxxxx", parts[7])
    assert.are.equal(1 << 20, #("ab"):rep(1 << 19))
  end)

  it("substitutes and matches", function()
    local text = ("the quick brown fox "):rep(500)
    local n = select(2, text:gsub("%w+", string.upper))
    assert.are.equal(2000, n)
    local words = {}
    for w in text:gmatch("%a+") do words[w] = (words[w] or 0) + 1 end
    assert.are.same({ the = 500, quick = 500, brown = 500, fox = 500 }, words)
  end)

  it("packs and handles utf8", function()
    local packed = string.pack("<i4 d z", 42, 2.5, "heaplab")
    local a, b, c = string.unpack("<i4 d z", packed)
    assert.are.same({ 42, 2.5, "heaplab" }, { a, b, c })
    assert.are.equal(5, utf8.len("héllo"))
    assert.are.equal("€", utf8.char(8364))
  end)
end)

describe("tables", function()
  it("grow, shrink and rehash", function()
    local t = {}
    for i = 1, 100000 do t[i] = i * 2 end
    for i = 1, 100000, 2 do t[i] = nil end
    local sum = 0
    for _, v in pairs(t) do sum = sum + v end
    assert.are.equal(5000100000, sum)
    local h = {}
    for i = 1, 50000 do h["k" .. i] = i end
    for i = 1, 50000, 3 do h["k" .. i] = nil end
    local n = 0
    for _ in pairs(h) do n = n + 1 end
    assert.are.equal(33333, n)
  end)

  it("sorts, inserts and removes", function()
    local t = {}
    for i = 1, 20000 do t[i] = (i * 7919) % 20011 end
    table.sort(t)
    for i = 2, #t do assert.is_true(t[i - 1] <= t[i]) end
    table.insert(t, 1, -1)
    assert.are.equal(-1, table.remove(t, 1))
    assert.are.equal(20000, #t)
    assert.are.same({ 3, 4, 5 }, table.move({ 1, 2, 3, 4, 5 }, 3, 5, 1, {}))
  end)
end)

describe("functions", function()
  it("close over upvalues", function()
    local function counter()
      local n = 0
      return function() n = n + 1 return n end
    end
    local cs = {}
    for i = 1, 1000 do cs[i] = counter() end
    for _ = 1, 3 do for i = 1, 1000 do cs[i]() end end
    assert.are.equal(4, cs[500]())
  end)

  it("run coroutines", function()
    local gen = coroutine.wrap(function()
      for i = 1, 10000 do coroutine.yield(i) end
    end)
    local sum = 0
    for _ = 1, 10000 do sum = sum + gen() end
    assert.are.equal(50005000, sum)
    local cos = {}
    for i = 1, 2000 do
      cos[i] = coroutine.create(function(a) local b = coroutine.yield(a + 1) return b * 2 end)
    end
    for i = 1, 2000 do assert.are.equal(i + 1, select(2, coroutine.resume(cos[i], i))) end
    for i = 1, 2000 do assert.are.equal(2 * i, select(2, coroutine.resume(cos[i], i))) end
  end)

  it("load generated code", function()
    local src = { "local t = {}" }
    for i = 1, 5000 do src[#src + 1] = ("t.f%d = %d"):format(i % 1500, i) end
    src[#src + 1] = "return t.f7 + t.f8"
    local f = assert(load(table.concat(src, "\n")))
    assert.are.equal(4507 + 4508, f())
  end)

  it("report errors", function()
    local ok, err = pcall(error, { code = 7 })
    assert.is_false(ok)
    assert.are.equal(7, err.code)
    ok, err = pcall(function() return nil + 1 end)
    assert.is_false(ok)
    assert.is_truthy(err:find("arithmetic"))
  end)
end)

describe("the collector", function()
  it("finalizes and clears weak tables", function()
    local finalized = 0
    for _ = 1, 1000 do
      setmetatable({}, { __gc = function() finalized = finalized + 1 end })
    end
    local weak = setmetatable({}, { __mode = "v" })
    for i = 1, 1000 do weak[i] = {} end
    collectgarbage("collect")
    collectgarbage("collect")
    assert.are.equal(1000, finalized)
    assert.is_nil(next(weak))
  end)

  it("runs generational, as the stock interpreter does", function()
    assert.are.equal("generational", collectgarbage("generational"))
    assert.are.equal("generational", collectgarbage("incremental"))
    assert.are.equal("incremental", collectgarbage("generational"))
  end)

  it("closes to-be-closed variables", function()
    local log = {}
    do
      local a <close> = setmetatable({}, { __close = function() log[#log + 1] = "a" end })
      local b <close> = setmetatable({}, { __close = function() log[#log + 1] = "b" end })
    end
    assert.are.same({ "b", "a" }, log)
  end)
end)
