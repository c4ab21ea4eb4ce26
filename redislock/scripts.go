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
// All keys of one script belong to one job; in Cluster mode they carry the
// job's hash tag (or the prefix's), so they live in one slot (keys.go).

// claimScript is the claim step of docs/protocol.md ("Claim"): the state
// repair (step 0), then steps 1–4, with the pending slot of overlap queue
// and replace (docs/protocol.md, "Queue and replace").
//
//	KEYS: 1 lease, 2 state, 3 paused, 4 pending, 5 backfilled slots
//	ARGV: 1 slot (0 = manual), 2 owner, 3 ttl ms, 4 "1" = take the lease,
//	      5 "1" = ignore pause (a forced manual run), 6 min slot, 7 min fence,
//	      8 "1" = need a record (catch-up): no slot record → outcome 4, NoRecord
//	      9 "1" = queue: a held lease records the slot as pending (outcome 5)
//	      10 "1" = backfill: no slot check or record; the slot goes into
//	         the backfilled set, and one already there is outcome 6
//	      11 max runs (0 = none): state.runs >= it → outcome 7, the slot
//	         recorded (not for a backfill)
//	      12 "1" = early (before the fire time): where the claim would
//	         skip (outcomes 2, 3, 5, 7) nothing is recorded and the
//	         outcome is 9, NotYet
//	returns {outcome, fence, state slot, state fence, repaired (0|1),
//	         found slot, found fence, lease holder ("" unless overlap or
//	         queued), pending slot kept (overlap), pending slot taken
//	         (claimed: the claim runs that slot, and its own is pending),
//	         the last run's start and end (state.last_start, last_end,
//	         RFC 3339; "" when none is recorded)};
//	outcome numbers are the actors.Outcome constants.
var claimScript = newScript(claimSrc, false, rueidis.WithLoadSHA1(true))

// claimBody is the claim step over K (the 5 keys) and A (the 12
// arguments) as claimScript lists them; claimSrc and claimBatchSrc run it.
const claimBody = `
local slot = tonumber(A[1])
local h = redis.call("HMGET", K[2], "slot", "fence", "last_start", "last_end")
local found_slot, found_fence = tonumber(h[1] or "0"), tonumber(h[2] or "0")
local last_start, last_end = h[3] or "", h[4] or ""
local cur, fence, repaired = found_slot, found_fence, 0
if tonumber(A[6]) > cur then
  cur, repaired = tonumber(A[6]), 1
  redis.call("HSET", K[2], "slot", A[6])
end
if tonumber(A[7]) > fence then
  fence, repaired = tonumber(A[7]), 1
  redis.call("HSET", K[2], "fence", A[7])
end
local kept, takes = 0, 0
local function reply(outcome, f, holder)
  return {outcome, f, cur, fence, repaired, found_slot, found_fence, holder, kept, takes, last_start, last_end}
end
local early = A[12] == "1"
local function record()
  if slot > 0 then
    cur = slot
    redis.call("HSET", K[2], "slot", A[1])
  end
end
local max_runs = tonumber(A[11])
local done = max_runs > 0 and tonumber(redis.call("HMGET", K[2], "runs")[1] or "0") >= max_runs
if A[10] == "1" then
  if redis.call("ZSCORE", K[5], A[1]) then return reply(6, 0, "") end
  if done then return reply(7, 0, "") end
  if A[5] ~= "1" and redis.call("EXISTS", K[3]) == 1 then return reply(2, 0, "") end
  if A[4] == "1" and not redis.call("SET", K[1], A[2], "NX", "PX", A[3]) then
    return reply(3, 0, redis.call("GET", K[1]) or "")
  end
  redis.call("ZADD", K[5], A[1], A[1])
  fence = redis.call("HINCRBY", K[2], "fence", 1)
  return reply(0, fence, "")
end
if slot > 0 and cur >= slot then return reply(1, 0, "") end
if A[8] == "1" and cur == 0 then return reply(4, 0, "") end
if done then
  if early then return reply(9, 0, "") end
  record()
  return reply(7, 0, "")
end
if A[5] ~= "1" and redis.call("EXISTS", K[3]) == 1 then
  if early then return reply(9, 0, "") end
  record()
  return reply(2, 0, "")
end
if A[4] == "1" then
  if not redis.call("SET", K[1], A[2], "NX", "PX", A[3]) then
    if early then return reply(9, 0, "") end
    record()
    local holder = redis.call("GET", K[1]) or ""
    if A[9] == "1" then
      kept = tonumber(redis.call("GET", K[4]) or "0")
      if kept == 0 then
        redis.call("SET", K[4], A[1])
        return reply(5, 0, holder)
      end
    end
    return reply(3, 0, holder)
  end
  if A[9] == "1" then
    takes = tonumber(redis.call("GET", K[4]) or "0")
    if takes > 0 then redis.call("SET", K[4], A[1]) end
  end
end
record()
fence = redis.call("HINCRBY", K[2], "fence", 1)
return reply(0, fence, "")
`

// claimSrc is claimScript's source (sent by claimReplicated as EVAL when
// the server does not know claimSHA).
const claimSrc = "local K, A = KEYS, ARGV\n" + claimBody

// claimBatchScript runs the claim step of several jobs in one call
// (Redis.Claim batches concurrent claims, batch.go): claim i (from 0) has
// KEYS 5i+1..5i+5 and ARGV 12i+1..12i+12, laid out as claimScript's. It
// returns one element per claim, in order: claimScript's reply, or an
// error reply when that claim's step raised an error, naming the command
// that raised it ("... (cronlock script command HINCRBY)"; the other
// claims of the batch are not affected; the failed one may have written
// part of its step, as a failed claimScript may).
var claimBatchScript = newScript(claimBatchSrc, false, rueidis.WithLoadSHA1(true))

const claimBatchSrc = `local real, last = redis, ""
local function claim(K, A)
  -- The step's redis.call, noting the command: an error it raises is
  -- caught by pcall below, which loses the script line Redis would name.
  local redis = {call = function(cmd, ...) last = cmd; return real.call(cmd, ...) end}
` + claimBody + `end
local out = {}
for i = 0, #KEYS / 5 - 1 do
  local K, A = {}, {}
  for k = 1, 5 do K[k] = KEYS[5 * i + k] end
  for a = 1, 12 do A[a] = ARGV[12 * i + a] end
  local ok, res = pcall(claim, K, A)
  if ok then
    out[#out + 1] = res
  else
    local msg = type(res) == "table" and res.err or tostring(res)
    if not string.match(msg, "^%u+ ") then msg = "ERR " .. msg end
    out[#out + 1] = {err = msg .. " (cronlock script command " .. last .. ")"}
  end
end
return out
`

// missedScript is the missed-slot report of docs/protocol.md ("Missed
// slots"): the last decided slot is the highest of state.slot, an earlier
// report (state.missed_to) and the caller's seen slot; when it is older
// than the certain slot, it records missed_to = latest and returns the last
// decided slot (this caller reports), else -1. 0 everywhere = a job never
// run: nothing to report.
//
//	KEYS: 1 state; ARGV: 1 seen slot, 2 certain slot, 3 latest slot
var missedScript = newScript(`
local h = redis.call("HMGET", KEYS[1], "slot", "missed_to")
local last = math.max(tonumber(h[1] or "0"), tonumber(h[2] or "0"), tonumber(ARGV[1]))
if last == 0 or last >= tonumber(ARGV[2]) then return -1 end
redis.call("HSET", KEYS[1], "missed_to", ARGV[3])
return last
`, false)

// renewScript is compare-and-PEXPIRE: when renewed it returns the pending
// slot (0 = none; overlap queue and replace), -1 when the lease is not ours.
//
//	KEYS: 1 lease, 2 pending; ARGV: 1 owner, 2 ttl ms
var renewScript = newScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return tonumber(redis.call("GET", KEYS[2]) or "0")
end
return -1
`, false)

// releaseScript is compare-and-DEL: 1 deleted, 0 not ours.
//
//	KEYS: 1 lease; ARGV: 1 owner
var releaseScript = newScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
  return redis.call("DEL", KEYS[1])
end
return 0
`, false)

// unhandScript takes back the lease a finish handed to a pending slot
// when nobody runs it (the finish's answer was lost): when the lease still
// holds ARGV[1], it deletes it and, if state.handed names ARGV[1] and no
// slot is pending, makes that slot pending again (the job's next claim
// runs it, docs/protocol.md "Queue and replace").
//
//	KEYS: 1 lease, 2 state, 3 pending; ARGV: 1 owner
//	returns -1: the lease is not ARGV[1]'s; 0: released, no slot put back;
//	        else the slot put back
var unhandScript = newScript(`
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return -1 end
redis.call("DEL", KEYS[1])
local h = redis.call("HGET", KEYS[2], "handed")
if h then
  local o, s = string.match(h, "^(.*) (%d+)$")
  if o == ARGV[1] and redis.call("EXISTS", KEYS[3]) == 0 then
    redis.call("SET", KEYS[3], s)
    return tonumber(s)
  end
end
return 0
`, false)

// finishScript ends a run in one round trip: compare-and-DEL of the lease
// (when ARGV[2] names an owner), then it appends the run record to the
// capped history stream and copies its fields, except output_tail, into the
// state hash as last_<field>. When the lease was released and a slot is
// pending (overlap queue or replace), it hands the lease to ARGV[3] for
// ARGV[4] ms, clears the pending slot, increments the fence and notes the
// hand-on as state.handed ("owner slot", for unhandScript); with ARGV[3]
// "" (the node stops) it leaves the pending slot for the next claim of
// another node; when ARGV[5] (max runs, 0 = none) has been reached it clears
// it (the job is done). A record with result success increments
// state.runs. A retry of a finish whose answer was lost (ARGV[6], the
// run's end in Unix ms, not "0") does not append the record again when
// the history already holds one with its run id (ARGV[8]: run_id is the
// first field), and does not overwrite the last_ fields when the history
// holds a record appended after the run's end (a later run's). When the
// capped history is full and its oldest record was appended less than
// retryMargin before the run's end, an earlier attempt's record may have
// been trimmed away: the retry appends nothing and answers unsure.
// MAXLEN is exact, not "~": approximate trimming only drops whole stream
// nodes (100 entries by default), so a cap of 100 could keep ~200 entries.
//
//	KEYS: 1 lease, 2 history, 3 state, 4 pending; ARGV: 1 max length,
//	2 owner ("" = no lease), 3 next owner ("" = none), 4 ttl ms,
//	5 max runs, 6 retry (the run's end in Unix ms; "0" = first try),
//	7.. field, value pairs
//	returns {released (0|1), pending slot (0 = none), fence handed to
//	         the next owner (0 = none), state slot, state fence, runs,
//	         left (1: the pending slot stays pending), unsure (0|1)}
var finishScript = newScript(finishSrc, false, rueidis.WithLoadSHA1(true))

// finishSrc is finishScript's source (sent by finishReplicated as EVAL
// when the server does not know finishSHA).
const finishSrc = `
local released = 0
if ARGV[2] ~= "" and redis.call("GET", KEYS[1]) == ARGV[2] then
  released = redis.call("DEL", KEYS[1])
end
local recorded, newer, unsure = false, false, 0
if ARGV[6] ~= "0" then
  for i, e in ipairs(redis.call("XREVRANGE", KEYS[2], "+", "-", "COUNT", ARGV[1])) do
    if i == 1 and tonumber(string.match(e[1], "^%d+")) > tonumber(ARGV[6]) then newer = true end
    local f = e[2]
    for k = 1, #f, 2 do
      if f[k] == "run_id" then
        if f[k+1] == ARGV[8] then recorded = true end
        break
      end
    end
    if recorded then break end
  end
  if not recorded and redis.call("XLEN", KEYS[2]) >= tonumber(ARGV[1]) then
    local first = redis.call("XRANGE", KEYS[2], "-", "+", "COUNT", 1)[1]
    if first and tonumber(string.match(first[1], "^%d+")) > tonumber(ARGV[6]) - ` + retryMarginMs + ` then
      unsure, recorded = 1, true
    end
  end
end
local fields, last, success = {}, {}, false
for i = 7, #ARGV, 2 do
  fields[#fields+1] = ARGV[i]
  fields[#fields+1] = ARGV[i+1]
  if ARGV[i] ~= "output_tail" then
    last[#last+1] = "last_" .. ARGV[i]
    last[#last+1] = ARGV[i+1]
  end
  if ARGV[i] == "result" and ARGV[i+1] == "success" then success = true end
end
local runs = tonumber(redis.call("HMGET", KEYS[3], "runs")[1] or "0")
if not recorded then
  redis.call("XADD", KEYS[2], "MAXLEN", ARGV[1], "*", unpack(fields))
  if not newer then redis.call("HSET", KEYS[3], unpack(last)) end
  if success then runs = redis.call("HINCRBY", KEYS[3], "runs", 1) end
end
local max_runs = tonumber(ARGV[5])
local pending, fence, left = 0, 0, 0
if released == 1 then
  pending = tonumber(redis.call("GET", KEYS[4]) or "0")
  local done = max_runs > 0 and runs >= max_runs
  if pending > 0 and done then
    redis.call("DEL", KEYS[4])
  elseif pending > 0 and ARGV[3] ~= "" then
    redis.call("DEL", KEYS[4])
    redis.call("SET", KEYS[1], ARGV[3], "PX", ARGV[4])
    fence = redis.call("HINCRBY", KEYS[3], "fence", 1)
    redis.call("HSET", KEYS[3], "handed", ARGV[3] .. " " .. pending)
  elseif pending > 0 then
    left = 1
  end
end
local h = redis.call("HMGET", KEYS[3], "slot", "fence")
return {released, pending, fence, tonumber(h[1] or "0"), tonumber(h[2] or "0"), runs, left, unsure}
`

// retryMarginMs is retryMargin in the finish script's text.
const retryMarginMs = "60000"
