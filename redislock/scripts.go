package redislock

import "github.com/redis/rueidis"

// Scripts run through rueidis.Lua.Exec: EVALSHA first, EVAL on NOSCRIPT
// (after a restart, failover or SCRIPT FLUSH). The claim and finish
// scripts are loaded with one SCRIPT LOAD at their first use in the
// process (rueidis.WithLoadSHA1; concurrent first calls wait for it), so
// that a herd right after start does not send every claim twice, the
// second time with the script's text (docs/protocol.md, "Redis calls"). They are not marked retryable:
// claimScript increments the fence, and a timed-out call may already have
// been applied (docs/protocol.md, "Redis calls").
//
// All keys of one script share the job's key prefix; in Cluster mode the
// prefix carries a {hash tag} so they live in one slot.

// claimScript is the claim step of docs/protocol.md ("Claim"): the state
// repair (step 0), then steps 1–4.
//
//	KEYS: 1 lease, 2 state, 3 paused
//	ARGV: 1 slot (0 = manual), 2 owner, 3 ttl ms, 4 "1" = take the lease,
//	      5 "1" = ignore pause (a forced manual run), 6 min slot, 7 min fence,
//	      8 "1" = need a record (catch-up): no slot record → outcome 4, NoRecord
//	returns {outcome, fence, state slot, state fence, repaired (0|1),
//	         found slot, found fence, lease holder ("" unless overlap)};
//	outcome numbers are the actors.Outcome constants.
var claimScript = rueidis.NewLuaScript(`
local slot = tonumber(ARGV[1])
local h = redis.call("HMGET", KEYS[2], "slot", "fence")
local found_slot, found_fence = tonumber(h[1] or "0"), tonumber(h[2] or "0")
local cur, fence, repaired = found_slot, found_fence, 0
if tonumber(ARGV[6]) > cur then
  cur, repaired = tonumber(ARGV[6]), 1
  redis.call("HSET", KEYS[2], "slot", ARGV[6])
end
if tonumber(ARGV[7]) > fence then
  fence, repaired = tonumber(ARGV[7]), 1
  redis.call("HSET", KEYS[2], "fence", ARGV[7])
end
local function reply(outcome, f, holder)
  return {outcome, f, cur, fence, repaired, found_slot, found_fence, holder}
end
local function record()
  if slot > 0 then
    cur = slot
    redis.call("HSET", KEYS[2], "slot", ARGV[1])
  end
end
if slot > 0 and cur >= slot then return reply(1, 0, "") end
if ARGV[8] == "1" and cur == 0 then return reply(4, 0, "") end
if ARGV[5] ~= "1" and redis.call("EXISTS", KEYS[3]) == 1 then
  record()
  return reply(2, 0, "")
end
if ARGV[4] == "1" then
  if not redis.call("SET", KEYS[1], ARGV[2], "NX", "PX", ARGV[3]) then
    record()
    return reply(3, 0, redis.call("GET", KEYS[1]) or "")
  end
end
record()
fence = redis.call("HINCRBY", KEYS[2], "fence", 1)
return reply(0, fence, "")
`, rueidis.WithLoadSHA1(true))

// missedScript is the missed-slot report of docs/protocol.md ("Missed
// slots"): the last decided slot is the highest of state.slot, an earlier
// report (state.missed_to) and the caller's seen slot; when it is older
// than the certain slot, it records missed_to = latest and returns the last
// decided slot (this caller reports), else -1. 0 everywhere = a job never
// run: nothing to report.
//
//	KEYS: 1 state; ARGV: 1 seen slot, 2 certain slot, 3 latest slot
var missedScript = rueidis.NewLuaScript(`
local h = redis.call("HMGET", KEYS[1], "slot", "missed_to")
local last = math.max(tonumber(h[1] or "0"), tonumber(h[2] or "0"), tonumber(ARGV[1]))
if last == 0 or last >= tonumber(ARGV[2]) then return -1 end
redis.call("HSET", KEYS[1], "missed_to", ARGV[3])
return last
`)

// renewScript is compare-and-PEXPIRE: 1 renewed, 0 not ours.
//
//	KEYS: 1 lease; ARGV: 1 owner, 2 ttl ms
var renewScript = rueidis.NewLuaScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0
`)

// releaseScript is compare-and-DEL: 1 deleted, 0 not ours.
//
//	KEYS: 1 lease; ARGV: 1 owner
var releaseScript = rueidis.NewLuaScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
`)

// finishScript ends a run in one round trip: compare-and-DEL of the lease
// (when ARGV[2] names an owner), then it appends the run record to the
// capped history stream and copies its fields, except output_tail, into the
// state hash as last_<field>. It returns 1 when a lease was deleted, else 0.
// MAXLEN is exact, not "~": approximate trimming only drops whole stream
// nodes (100 entries by default), so a cap of 100 could keep ~200 entries.
//
//	KEYS: 1 lease, 2 history, 3 state; ARGV: 1 max length, 2 owner ("" = no
//	lease), 3.. field, value pairs
var finishScript = rueidis.NewLuaScript(`
local released = 0
if ARGV[2] ~= "" and redis.call("GET", KEYS[1]) == ARGV[2] then
  released = redis.call("DEL", KEYS[1])
end
local fields, last = {}, {}
for i = 3, #ARGV, 2 do
  fields[#fields+1] = ARGV[i]
  fields[#fields+1] = ARGV[i+1]
  if ARGV[i] ~= "output_tail" then
    last[#last+1] = "last_" .. ARGV[i]
    last[#last+1] = ARGV[i+1]
  end
end
redis.call("XADD", KEYS[2], "MAXLEN", ARGV[1], "*", unpack(fields))
redis.call("HSET", KEYS[3], unpack(last))
return released
`, rueidis.WithLoadSHA1(true))
