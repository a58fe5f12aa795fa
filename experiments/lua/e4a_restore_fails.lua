-- E4(a) every restore fails, in Lua -- DESIGN.md section 6.
--
-- On Linux a restore is not a system call at all (MADV_DONTNEED needs no
-- undo), so this models Darwin's MADV_FREE_REUSE being refused; the injected
-- failure takes exactly the path a real one would.  experiments/
-- test_e4_reuse_failures.py is the Python version (a different protocol:
-- pages kept across rounds); this one is written against the Lua module.
--
-- Protocol: warm cache 0, so every refill goes through the released pool.
-- Round 0 fills 64 MiB of 256-byte objects, checksums them, drops them and
-- collects until settled (their pages are released).  Then, in the
-- restore_fails arm only, every restore of a released page is made to fail
-- (h:inject("restore", "always", 0, "EIO")).  Rounds 1..5 repeat fill /
-- checksum / drop / collect: each refill wants the released pages back.
--
-- Arms (one per process: lua5.4 e4a_restore_fails.lua clean|restore_fails):
--   clean          the control: refills restore and reuse the released pages
--   restore_fails  every restore fails: each page acquisition tries
--                  reuse_attempts released pages, parks them as reuse-failed,
--                  and takes a fresh page instead
--
-- Asserted effect (this script, per arm; it exits 1 if one does not hold):
--   both      every round's checksum (and object count) equals round 0's,
--             taken before anything was injected: the results are identical;
--             no syscall retry and no give-up: the injected EIO goes through
--             the same retry loop as a real failure, which retries only EAGAIN
--             (a spin over restores would show in the restore failures per
--             fresh page below, and in the round times across arms);
--             bounded growth: no round's peak exceeds round 0's peak growth
--             by more than 25% (one fill kept charged would be ~80%), and
--             each drop returns the footprint to
--             within 10% of a fill of where round 0 started.
--   restore_fails  the fault fired, restore_failed_pages counts it (at most
--             reuse_attempts per fresh page), and no released page was
--             reused after it was armed; fresh_pages shows the price
--             (virtual: one fill's pages per round).
--   clean     refills reuse released pages; no restore fails.
-- Across arms (experiments/test_lua_experiments.py): the checksums are the
-- clean arm's, round by round, and restore_fails' rounds take at most 2x
-- clean's (fastest round, wall time less runqueue wait; raw wall reported).
package.path = (arg[0]:match("^(.*)/[^/]*$") or ".") .. "/?.lua;" .. package.path
local heaplab = require "heaplab"
local H = require "harness"

local FILL = 64 << 20
local SIZE = 256
local ROUNDS = 6 -- round 0 and five refills

local function restore_fails(rec, options, params)
  local h = assert(heaplab.heap(options))
  for round = 0, ROUNDS - 1 do
    if round == 1 and params.inject then
      assert(h:inject(table.unpack(params.inject)))
      rec:note("armed_after_round", 0)
      rec:note("stats_when_armed", assert(h:stats()))
    end
    rec:phase("round" .. round, h, function(ph)
      local r = assert(h:fill(FILL, SIZE))
      local sum, objects = assert(r:checksum())
      ph:note("checksum", { sum, objects })
      ph:mark("drop")
      r:release()
      ph:note("cycles", H.collect_until_settled(h))
      ph:note("injected", round >= 1 and params.inject ~= nil)
      ph:note("restore_fired", assert(h:faults()).restore.fired)
    end)
  end
  rec:note("reuse_attempts", assert(h:options()).reuse_attempts)
  h:close()
end

local function check(rec, arm)
  local injected = arm == "restore_fails"
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
  -- rounds after the first: wall time, and wall time less runqueue wait
  local wall, own = H.array(), H.array()
  for round = 1, ROUNDS - 1 do
    local r = rec:get("round" .. round)
    wall[#wall + 1] = r.duration_s
    own[#own + 1] = r.duration_s - r.waited_s
  end
  rec:note("round_s", wall)
  rec:note("round_own_s", own)

  rec:expect("checksums", same and "all rounds equal round 0" or "a round differs",
             "identical to round 0 (uninjected)", same, "round" .. (ROUNDS - 1))
  -- not a spin check: EIO is never retried, so this holds however often the
  -- heap calls restore; the restore failures per fresh page (restore_fails)
  -- and the round times vs clean (test_lua_experiments.py) are the checks
  -- that a spin or a stall would fail
  rec:expect("EIO not retried", ("%d retries, %d gave up"):format(
             last.syscall_retries, last.syscall_gave_up), "0 retries, 0 give-ups",
             last.syscall_retries == 0 and last.syscall_gave_up == 0, "round" .. (ROUNDS - 1))
  -- rounds after the first peak ~5% above round 0 in both arms (measured);
  -- a round that kept its fill charged would add a whole fill (~1.8x)
  rec:expect("peak growth", H.mib(worst_peak) .. " worst round",
             "<= 1.25 x round 0's " .. H.mib(peak0), worst_peak <= 1.25 * peak0, "round0")
  rec:expect("after each drop", H.mib(worst_low) .. " above the start",
             "<= 10% of the fill", worst_low <= 0.1 * FILL, "round" .. (ROUNDS - 1))
  local fill_pages = FILL // 65536
  if injected then
    local failed = last.restore_failed_pages - armed.restore_failed_pages
    local reused = last.reused_pages - armed.reused_pages
    local grew = fresh[#fresh] - fresh[1]
    local attempts = rec.notes.reuse_attempts
    rec:expect("restore failures", ("%d failed, %.2f per fresh page, %d reused"):format(failed,
               failed / math.max(1, grew), reused),
               ("> 0, <= %d per fresh page, 0 reused after arming"):format(attempts),
               failed > 0 and failed <= attempts * grew and reused == 0
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
  seed = { restore_fails = "completes, bit-identical RESULT, neither spins nor stalls" },
  options = H.SEED_POLICIES,
  arms = {
    clean = { options = { warm_pages = 0, warm_demand_trims = 0 }, params = {} },
    restore_fails = { options = { warm_pages = 0, warm_demand_trims = 0 },
                      params = { inject = { "restore", "always", 0, "EIO" } } },
  },
  body = restore_fails,
  check = check,
}
