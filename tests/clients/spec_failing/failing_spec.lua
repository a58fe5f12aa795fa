-- A spec that must fail: busted's exit status and report have to be the
-- same on every allocator.
describe("a failing spec", function()
  it("passes", function() assert.are.equal(2, 1 + 1) end)
  it("fails", function() assert.are.equal(3, 1 + 1) end)
  it("errors", function() error("raised on purpose") end)
end)
