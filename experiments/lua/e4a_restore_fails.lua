-- E4(a) every restore fails, in Lua -- DESIGN.md section 6.
--
-- Protocol: round 0 fills 64 MiB of 256-byte objects, checksums them, drops
-- them and collects until settled (their pages are released).  Then, in the
-- injected arm only, every restore of a released page is made to fail
-- (h:inject("restore", "always", 0, "EIO")).  Rounds 1..5 repeat fill /
-- checksum / drop / collect: each refill wants the released pages back.
--
-- Arms (one per process: lua5.4 e4a_restore_fails.lua uninjected|injected):
--   uninjected  the control: refills restore and reuse the released pages
--   injected    every restore fails: each page acquisition tries
--               reuse_attempts released pages, parks them as reuse-failed,
--               and takes a fresh page instead
--
-- Asserted effect (this script, per arm; it exits 1 if one does not hold):
--   both      every round's checksum (and object count) equals round 0's,
--             taken before anything was injected: the results are identical;
--             no spinning: no EAGAIN retries, no give-ups (EIO is not retried);
--             bounded growth: no round's peak exceeds round 0's peak growth
--             by more than 10% (plus the warm cache that stays resident
--             between rounds), and each drop returns the footprint to
--             within 10% of a fill of where round 0 started.
--   injected  the fault fired, restore_failed_pages counts it, and no
--             released page was reused after it was armed; fresh_pages shows
--             the price (virtual: one fill's pages per round).
--   uninjected  refills reuse released pages; no restore fails.
-- Across arms (experiments/test_lua_experiments.py): the checksums are the
-- uninjected arm's, and the injected rounds' median wall time is within 2x
-- of the uninjected arm's.
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local heaplab = require "heaplab"
local H = require "harness"

local FILL = 64 << 20
local SIZE = 256
local ROUNDS = 6 -- round 0 and five refills

local function restore_fails(rec, options, params)
  local h = heaplab.heap(options)
  for round = 0, ROUNDS - 1 do
    if round == 1 and params.inject then
      h:inject(table.unpack(params.inject))
      rec:note("armed_after_round", 0)
      rec:note("stats_when_armed", h:stats())
    end
    rec:phase("round" .. round, h, function(ph)
      local r = h:fill(FILL, SIZE)
      local sum, objects = r:checksum()
      ph:note("checksum", { sum, objects })
      ph:mark("drop")
      r:release()
      ph:note("cycles", H.collect_until_settled(h))
      ph:note("injected", round >= 1 and params.inject ~= nil)
      ph:note("restore_fired", h:faults().restore.fired)
    end)
  end
  local eff = h:options()
  rec:note("warm_bytes", eff.warm_pages * eff.page_size)
  h:close()
end

local function check(rec, arm)
  local injected = arm == "injected"
  local r0 = rec:get("round0")
  local base = r0.phys_before
  local peak0 = r0.phys_peak - base
  local fresh = H.array()
  local same, worst_peak, worst_low = true, 0, 0
  for round = 0, ROUNDS - 1 do
    local r = rec:get("round" .. round)
    local c, c0 = r.notes.checksum, r0.notes.checksum
    if c[1] ~= c0[1] or c[2] ~= c0[2] then same = false end
    worst_peak = math.max(worst_peak, r.phys_peak - base)
    worst_low = math.max(worst_low, r.phys_before - H.returned(r) - base)
    fresh[#fresh + 1] = r.stats.fresh_pages
  end
  local last = rec:get("round" .. (ROUNDS - 1)).stats
  local armed = rec.notes.stats_when_armed or rec:get("round0").stats
  rec:note("fresh_pages_by_round", fresh)
  rec:note("restore_failed_pages", last.restore_failed_pages)
  rec:note("reused_pages", last.reused_pages)
  rec:note("median_round_s", (function()
    local d = {}
    for round = 1, ROUNDS - 1 do d[#d + 1] = rec:get("round" .. round).duration_s end
    table.sort(d)
    return d[(#d + 1) // 2]
  end)())

  rec:expect("checksums", same and "all rounds equal round 0" or "a round differs",
             "identical to round 0 (uninjected)", same, "round" .. (ROUNDS - 1))
  rec:expect("no spinning", ("%d retries, %d gave up"):format(last.syscall_retries,
             last.syscall_gave_up), "0 and 0",
             last.syscall_retries == 0 and last.syscall_gave_up == 0, "round" .. (ROUNDS - 1))
  -- later rounds start with the warm cache resident on top of round 0's start
  local warm = rec.notes.warm_bytes
  rec:expect("peak growth", H.mib(worst_peak) .. " worst round",
             ("<= 1.1 x round 0's %s + warm cache %s"):format(H.mib(peak0), H.mib(warm)),
             worst_peak <= 1.1 * peak0 + warm, "round0")
  rec:expect("after each drop", H.mib(worst_low) .. " above the start",
             "<= 10% of the fill", worst_low <= 0.1 * FILL, "round" .. (ROUNDS - 1))
  local fill_pages = FILL // 65536
  if injected then
    local failed = last.restore_failed_pages - armed.restore_failed_pages
    local reused = last.reused_pages - armed.reused_pages
    local grew = fresh[#fresh] - fresh[1]
    rec:expect("restore failures", ("%d failed, %d fresh pages taken"):format(failed, grew),
               "> 0 failed, 0 reused after arming", failed > 0 and reused == 0
               and last.faults_fired >= failed, "round" .. (ROUNDS - 1))
    rec:expect("fresh pages per refill", ("%.0f"):format(grew / (ROUNDS - 1)),
               ">= one fill's " .. fill_pages .. " pages (virtual only)",
               grew >= (ROUNDS - 1) * fill_pages, "round" .. (ROUNDS - 1))
  else
    local reused = last.reused_pages
    rec:expect("reuse", ("%d pages reused, %d fresh after round 0"):format(reused,
               fresh[#fresh] - fresh[1]), "> 0 reused, 0 failed",
               reused > 0 and last.restore_failed_pages == 0, "round" .. (ROUNDS - 1))
  end
end

H.main{
  experiment = "E4a", title = "every restore fails",
  seed = { injected = "seed 000 review: a failed restore must not lose data or spin" },
  arms = {
    uninjected = { options = {}, params = {} },
    injected = { options = {}, params = { inject = { "restore", "always", 0, "EIO" } } },
  },
  body = restore_fails,
  check = check,
}
