package redislock

import "github.com/redis/rueidis"

// Scripts run through rueidis.Lua.Exec: EVALSHA first, EVAL on NOSCRIPT
// (after a restart, failover or SCRIPT FLUSH). They are not marked retryable:
// claimScript increments the fence, and a timed-out call may already have
// been applied (docs/protocol.md, "Redis calls").
//
// All keys of one script share the job's key prefix; in Cluster mode the
// prefix carries a {hash tag} so they live in one slot.

// claimScript is the claim step of docs/protocol.md ("Claim"), steps 1–4.
//
//	KEYS: 1 lease, 2 state, 3 paused
//	ARGV: 1 slot (0 = manual), 2 owner, 3 ttl ms, 4 "1" = take the lease,
//	      5 "1" = ignore pause (a forced manual run)
//	returns {outcome, fence}; outcome numbers are the actors.Outcome constants.
var claimScript = rueidis.NewLuaScript(`
local slot = tonumber(ARGV[1])
if slot > 0 then
  local cur = redis.call("HGET", KEYS[2], "slot")
  if cur and tonumber(cur) >= slot then return {1, 0} end
end
if ARGV[5] ~= "1" and redis.call("EXISTS", KEYS[3]) == 1 then
  if slot > 0 then redis.call("HSET", KEYS[2], "slot", ARGV[1]) end
  return {2, 0}
end
if ARGV[4] == "1" then
  if not redis.call("SET", KEYS[1], ARGV[2], "NX", "PX", ARGV[3]) then
    if slot > 0 then redis.call("HSET", KEYS[2], "slot", ARGV[1]) end
    return {3, 0}
  end
end
if slot > 0 then redis.call("HSET", KEYS[2], "slot", ARGV[1]) end
return {0, redis.call("HINCRBY", KEYS[2], "fence", 1)}
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
`)
