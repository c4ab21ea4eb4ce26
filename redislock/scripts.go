package redislock

// Scripts run through rueidis.Lua.Exec: EVALSHA first, EVAL on NOSCRIPT
// (after a restart, failover or SCRIPT FLUSH). None is marked retryable:
// a claim mints a token and writes a record, and a timed-out call may have
// been applied (docs/protocol.md). All keys of one script belong to one
// job; in Cluster mode they carry the job's hash tag (keys.go), so they
// live in one cluster slot.
//
// Every rule a script keeps is named as in docs/protocol.md (R1–R9). Times
// are Redis time (TIME) in milliseconds: no node's clock decides (R2).

// ledgerLib is the Lua shared by the scripts that write the ledger: the
// clock (R2), the JSON of a record, the token rule (R4) and retention (R9).
// It expects K (the keys) and A (the arguments) and the state hash at
// K[2], the ledger hash at K[3] and its index at K[4].
//
// The state hash is read once at the start (HMGET) and its changes are
// written once at the end: a script keeps seq (and fence, when it read
// it) in the locals below, puts every change in W and calls flush before
// it returns. (make bench's herd: each redis.call from a script costs
// about as much as the command itself, and Redis's CPU per script call
// decides how many claims a herd gets answered in its first second.)
const ledgerLib = `
local seq, fence, W = 0, nil, {}
local t = redis.call("TIME")
local t_s, t_us = tonumber(t[1]), tonumber(t[2])
local now, now_us = t_s * 1000 + math.floor(t_us / 1000), t_s * 1000000 + t_us
local function n(x) return string.format("%.0f", x) end
local function q(s)
  if not string.find(s, '[%c"\\]') then return '"' .. s .. '"' end -- most: nothing to escape
  return '"' .. string.gsub(s, '[%c"\\]', function(c) return string.format("\\u%04x", string.byte(c)) end) .. '"'
end
-- R4: tokens strictly increase per job, also after the state hash is
-- lost, as long as Redis's clock does not step back. fence is the
-- state's, as the script read it (nil: read here).
local function mint()
  if not fence then fence = redis.call("HGET", K[2], "fence") or "0" end
  fence = math.max(tonumber(fence) + 1, now_us)
  W.fence = fence
  return fence
end
-- flush writes the state fields the script changed, in one HSET.
local function flush()
  local kv = {}
  for k, v in pairs(W) do
    kv[#kv + 1] = k
    kv[#kv + 1] = type(v) == "number" and n(v) or v
  end
  if #kv > 0 then redis.call("HSET", K[2], unpack(kv)) end
  W = {}
end
local function record(id, slot, status, reason, node, token, trig, run_id)
  return '{"id":' .. q(id) .. ',"slot":' .. n(slot) .. ',"status":"' .. status .. '","reason":' .. q(reason) ..
    ',"node":' .. q(node) .. ',"token":' .. n(token) .. ',"trigger":' .. q(trig) .. ',"run_id":' .. q(run_id) ..
    ',"claimed":' .. n(now) .. '}'
end
-- put writes a record and counts it in seq; indexed: the record's index
-- entry exists with this score already (a finish over its claim's record).
local function put(id, slot, json, indexed)
  redis.call("HSET", K[3], id, json)
  if indexed then
  elseif slot > 0 then
    redis.call("ZADD", K[4], slot, id)
  else
    redis.call("ZADD", K[4], math.floor(now / 1000), id)
  end
  seq = seq + 1
  W.seq = seq
  return seq
end
-- R9: at most max + slack records, none older than age; at most lim a
-- call, and never a record whose slot is within protect ms of now (a slot
-- still claimable by any trigger keeps its record). A ledger is cut back
-- to max only once it holds more than max + slack: a claim then trims
-- slack + 1 records in one call instead of one in each.
local function trim(age_ms, max, lim, protect_ms, slack)
  -- Most calls find nothing to trim: the count within max + slack and the
  -- oldest record young enough cost two reads.
  local count = redis.call("ZCARD", K[4])
  if count == 0 then return end
  local old = "(" .. n(math.floor((now - math.max(age_ms, protect_ms)) / 1000))
  if count <= max + slack and #redis.call("ZRANGEBYSCORE", K[4], "-inf", old, "LIMIT", 0, 1) == 0 then
    return
  end
  local bound = "(" .. n(math.floor((now - math.max(protect_ms, 0)) / 1000))
  local cut = {}
  local extra = count - max
  if extra > 0 then
    cut = redis.call("ZRANGEBYSCORE", K[4], "-inf", bound, "LIMIT", 0, math.min(extra, lim))
  end
  if #cut < lim then
    for _, m in ipairs(redis.call("ZRANGEBYSCORE", K[4], "-inf", old, "LIMIT", #cut, lim - #cut)) do cut[#cut + 1] = m end
  end
  if #cut == 0 then return end
  local to = tonumber(redis.call("HGET", K[2], "trimmed_to") or "0")
  for _, m in ipairs(cut) do
    redis.call("HDEL", K[3], m)
    redis.call("ZREM", K[4], m)
    local s = tonumber(m)
    if s and s > to then to = s end
  end
  redis.call("HSET", K[2], "trimmed_to", n(to))
end
`

// claimScript decides one occurrence (docs/protocol.md, R1–R7).
//
//	KEYS: 1 lease, 2 state, 3 ledger, 4 ledger index, 5 paused, 6 pending,
//	      7 in-flight claims (occurrence id scored by its claim time)
//	ARGV: 1 slot (0 = manual), 2 trigger, 3 node, 4 run id, 5 ttl ms,
//	      6 "1" = take the lease, 7 "1" = queue, 8 "1" = ignore pause (and,
//	      for a backfill, state_lost), 9 max runs, 10 seen seq, 11 seen runs,
//	      12 early ms, 13 answer window ms, 14 catch-up window ms,
//	      15 retention ms, 16 retention records
//	returns {outcome, token, now ms, seq, runs, repaired (0|1), found seq,
//	         record status, record reason, lease holder, pending kept,
//	         pending taken, pending expired}
//	outcome numbers are the ledger.Outcome constants.
const claimSrc = `local K, A = KEYS, ARGV
` + ledgerLib + `
local slot, trig, node, run_id = tonumber(A[1]), A[2], A[3], A[4]
local owner = node .. ":" .. run_id
local h = redis.call("HMGET", K[2], "seq", "runs", "since", "lost_at", "trimmed_to", "unknown", "fence")
seq, fence = tonumber(h[1] or "0"), h[7] or "0"
local runs, lost_at = tonumber(h[2] or "0"), tonumber(h[4] or "0")
local since = tonumber(h[3] or n(now)) -- a new ledger begins now
local ms, early, answer, catchup = slot * 1000, tonumber(A[12]), tonumber(A[13]), tonumber(A[14])
local found_seq, repaired, wrote = seq, 0, false
if not h[3] then W.since = now end
-- R5: the ledger is behind what this node saw: Redis lost state.
if tonumber(A[10]) > seq then
  seq, repaired, lost_at = tonumber(A[10]), 1, now
  W.seq, W.lost_at = seq, now
end
-- R6: max_runs survives the loss through the nodes that saw it.
if tonumber(A[11]) > runs then
  runs, repaired = tonumber(A[11]), 1
  W.runs = runs
end
local kept, takes, expired = 0, 0, 0
local function reply(outcome, token, status, reason, holder)
  flush()
  if wrote then trim(tonumber(A[15]), tonumber(A[16]), 10, early + answer + catchup, math.min(math.floor(tonumber(A[16]) / 10), 9)) end
  return {outcome, token, now, seq, runs, repaired, found_seq, status or "", reason or "", holder or "", kept, takes, expired}
end
local function decide(status, reason)
  if slot > 0 then
    put(A[1], slot, record(A[1], slot, status, reason, node, 0, trig, ""))
    wrote = true
  end
end
-- R2: Redis time is the clock. Outside the window nothing is written;
-- a claim sent before the slot (a clock fast by less than the early edge)
-- decides nothing either: it is answered "early" and sent again at the
-- slot by Redis time, so that no lease or pause is judged before it.
if trig == "schedule" and (now < ms - early or now > ms + answer) then return reply(6, 0) end
if trig == "schedule" and now < ms then return reply(11, 0) end
-- R9: a slot older than the ledger keeps can no longer be told apart.
if slot > 0 and slot <= tonumber(h[5] or "0") then return reply(9, 0) end
-- A catch-up claim of a slot due before the ledger began (a new ledger, or
-- one Redis lost) cannot tell whether that slot ran: refused.
if trig == "catchup" and (now < ms or now > ms + catchup or not h[3] or ms < tonumber(h[3])) then
  return reply(7, 0)
end
if trig == "backfill" and now <= ms + answer then return reply(7, 0) end
-- R1: a record decides the slot; catch-up may run a missed slot, and a
-- backfill a missed or skipped one (neither ran).
if slot > 0 then
  local cur = redis.call("HGET", K[3], A[1])
  if cur then
    -- status and reason, which every record writes in that order: two
    -- anchored matches (a lost claim's cost is mostly such string work).
    local at, st, why = string.find(cur, '"status":"', 1, true), "", ""
    if at then
      st = string.match(cur, '^%a+', at + 10) or ""
      why = string.match(cur, '^","reason":"([^"]*)"', at + 10 + #st) or string.match(cur, '"reason":"([^"]*)"') or ""
    end
    local rerun = st == "missed" and trig ~= "schedule" or
      st == "skipped" and trig == "backfill" and (why ~= "state_lost" or A[8] == "1") or
      st == "unknown" and trig == "backfill" and A[8] == "1"
    -- R5: a missed record written around a loss may stand for a slot
    -- that ran (its record lost): only a forced backfill runs it.
    if rerun and st == "missed" and lost_at > 0 and ms <= lost_at + early and A[8] ~= "1" then
      return reply(8, 0)
    end
    if not rerun then
      return reply(1, 0, st, why)
    end
  elseif lost_at > 0 and ms <= lost_at + early then
    -- R5: a slot that may have been claimed before the loss.
    if trig == "schedule" then
      decide("skipped", "state_lost")
      return reply(8, 0)
    end
    if A[8] ~= "1" then return reply(8, 0) end
  end
end
-- R6: successful runs, claims in flight (until their finish, or the
-- audit declares them unknown) and runs of unknown outcome.
local max_runs = tonumber(A[9])
if max_runs > 0 then
  local inflight = redis.call("ZCARD", K[7]) + tonumber(h[6] or "0")
  if runs + inflight >= max_runs then
    decide("skipped", "max_runs")
    return reply(5, 0)
  end
end
if A[8] ~= "1" and redis.call("EXISTS", K[5]) == 1 then
  decide("skipped", "paused")
  return reply(2, 0)
end
if A[6] == "1" then
  if not redis.call("SET", K[1], owner, "NX", "PX", A[5]) then
    local holder = redis.call("GET", K[1]) or ""
    if A[7] == "1" then
      kept = tonumber(redis.call("GET", K[6]) or "0")
      if kept == 0 then
        redis.call("SET", K[6], A[1])
        decide("queued", "")
        return reply(4, 0, "", "", holder)
      end
    end
    decide("skipped", "overlap")
    return reply(3, 0, "", "", holder)
  end
  if A[7] == "1" then
    -- R7: a pending slot whose holder ended without handing it on runs
    -- now only within the catch-up window (this slot came due after it).
    local p = tonumber(redis.call("GET", K[6]) or "0")
    if p > 0 and p < slot and now - p * 1000 <= catchup then
      takes = p
    elseif p > 0 then
      expired = p
      redis.call("DEL", K[6])
      put(tostring(p), p, record(tostring(p), p, "skipped", "expired", node, 0, "queued", ""))
    end
  end
end
local token = mint()
local id = A[1]
if slot == 0 then id = "m" .. n(token) end
if takes > 0 then
  redis.call("SET", K[6], A[1])
  put(tostring(takes), takes, record(tostring(takes), takes, "claimed", "", node, token, "queued", run_id))
  redis.call("ZADD", K[7], now, tostring(takes))
  decide("queued", "")
else
  put(id, slot, record(id, slot, "claimed", "", node, token, trig, run_id))
  redis.call("ZADD", K[7], now, id)
end
wrote = true
return reply(0, token)
`

var claimScript = newScript(claimSrc, false)

// finishScript writes an occurrence's final record (R1: only over the
// record of the same run), counts a success (R6, once per run), releases
// the lease, and hands it to a pending slot (R4: its token is minted here).
//
//	KEYS: 1 lease, 2 state, 3 ledger, 4 ledger index, 5 pending, 6 in-flight
//	ARGV: 1 owner ("" = none), 2 next owner ("" = none), 3 ttl ms,
//	      4 max runs, 5 occurrence id, 6 index score (the slot, or a manual
//	      run's claim time in Unix seconds), 7 record JSON,
//	      8 "1" = a success, 9 "1" = a run (its record becomes state.last),
//	      10 run id, 11 next node, 12 next run id, 13 "1" = a claim whose
//	      answer was lost: this run's claimed or unknown records (the slot
//	      sent, and any in flight) become skipped redis_error, ARGV 7-9
//	      unused; none is created
//	returns {released, pending, token, left, runs, seq, now ms, conflict}
const finishSrc = `local K, A = KEYS, ARGV
` + ledgerLib + `
local released = 0
if A[1] ~= "" and redis.call("GET", K[1]) == A[1] then released = redis.call("DEL", K[1]) end
local cur = redis.call("HGET", K[3], A[5])
local mine = '"run_id":' .. q(A[10])
local conflict = 0
local h = redis.call("HMGET", K[2], "runs", "seq", "fence")
local runs = tonumber(h[1] or "0")
seq, fence = tonumber(h[2] or "0"), h[3] or "0"
if A[13] == "1" then
  -- A claim whose answer was lost (R6): its node ran nothing. Each record
  -- of this run still claimed (the slot asked for, or a pending slot the
  -- claim took instead) or given up by the audit becomes skipped
  -- redis_error; none is created, so a claim never applied leaves its slot
  -- free, and another run's record is left as it is.
  local ids = redis.call("ZRANGE", K[6], 0, -1)
  ids[#ids + 1] = A[5]
  for _, id in ipairs(ids) do
    local r = redis.call("HGET", K[3], id)
    local unknown = r and string.find(r, mine, 1, true) and string.find(r, '"status":"unknown"', 1, true)
    if unknown or (r and string.find(r, mine, 1, true) and string.find(r, '"status":"claimed"', 1, true)) then
      if unknown then redis.call("HINCRBY", K[2], "unknown", -1) end
      redis.call("ZREM", K[6], id)
      local s = tonumber(string.match(r, '"slot":(%d+)') or "0")
      put(id, s, (string.gsub(r, '"status":"%a+","reason":"[^"]*"', '"status":"skipped","reason":"redis_error"', 1)), true)
    end
  end
elseif cur and not string.find(cur, mine, 1, true) then
  conflict = 1
else
  local counted = cur and string.find(cur, '"status":"ran"', 1, true)
  local unknown = cur and string.find(cur, '"status":"unknown"', 1, true)
  if unknown then
    redis.call("HINCRBY", K[2], "unknown", -1) -- the audit gave up on it; its finish came after all
  end
  redis.call("ZREM", K[6], A[5])
  -- The claim's record is indexed under the score sent (the slot, or a
  -- manual run's claim second): its index entry is kept as it is (the
  -- audit's unknown record of a manual run is indexed at the audit's time).
  put(A[5], tonumber(A[6]), A[7], cur and not unknown)
  if A[8] == "1" and not counted then
    runs = runs + 1
    W.runs = runs
  end
  if A[9] == "1" then W.last = A[7] end
end
local pending, token, left = 0, 0, 0
if released == 1 then
  pending = tonumber(redis.call("GET", K[5]) or "0")
  local max_runs = tonumber(A[4])
  if pending > 0 and max_runs > 0 and runs >= max_runs then
    redis.call("DEL", K[5])
    put(tostring(pending), pending, record(tostring(pending), pending, "skipped", "max_runs", A[11], 0, "queued", ""))
  elseif pending > 0 and A[2] ~= "" then
    redis.call("DEL", K[5])
    redis.call("SET", K[1], A[2], "PX", A[3])
    token = mint()
    put(tostring(pending), pending, record(tostring(pending), pending, "claimed", "", A[11], token, "queued", A[12]))
    redis.call("ZADD", K[6], now, tostring(pending))
    W.handed = A[2] .. " " .. n(pending)
  elseif pending > 0 then
    left = 1
  end
end
flush()
return {released, pending, token, left, runs, seq, now, conflict}
`

var finishScript = newScript(finishSrc, false)

// auditScript accounts for occurrences (R8). With no slots it only reads
// audited_to, starting a new ledger's at Redis time. It first runs the
// loss check of R5 with the node's seen seq, and declares unknown the
// claims in flight whose lease and answer window passed without a finish
// (their node died, or their finish was lost): they may have run, so they
// are neither missed nor runnable again without -force, and count toward
// max_runs. Then, only if audited_to still holds ARGV[1] (so one node
// records each batch), it records the given slots whose answer window and
// grace have passed and that have no record: skipped state_lost within the
// early edge of a detected loss (their record may be what was lost),
// skipped max_runs for a job that made its runs, else missed; and moves
// audited_to past the last slot it decided.
//
//	KEYS: 1 lease, 2 state, 3 ledger, 4 ledger index, 5 in-flight
//	ARGV: 1 audited_to read, 2 window + grace ms, 3 node, 4 reason,
//	      5 retention ms, 6 retention records, 7 max runs (0 = none),
//	      8 seen seq, 9 lock ttl ms, 10 early ms, 11.. slots, ascending
//	returns {audited_to before, stale (0|1), audited_to after, now ms,
//	         {missed slots}, seq, runs, repaired (0|1), {unknown ids}}
var auditScript = newScript(`local K, A = KEYS, ARGV
`+ledgerLib+`
local h = redis.call("HMGET", K[2], "audited_to", "since", "seq", "runs", "lost_at")
seq = tonumber(h[3] or "0")
local runs, lost_at = tonumber(h[4] or "0"), tonumber(h[5] or "0")
local repaired, early = 0, tonumber(A[10])
if tonumber(A[8]) > seq then -- R5, as in the claim
  seq, repaired, lost_at = tonumber(A[8]), 1, now
  W.seq, W.lost_at = seq, now
end
local at = tonumber(h[1] or "0")
if not h[1] then
  at = math.floor(now / 1000)
  W.audited_to = at
  if not h[2] then W.since = now end
end
local unknown = {}
local gone = now - tonumber(A[9]) - tonumber(A[2])
for _, id in ipairs(redis.call("ZRANGEBYSCORE", K[5], "-inf", "(" .. n(gone), "LIMIT", 0, 20)) do
  local cur = redis.call("HGET", K[3], id)
  local owner = cur and ((string.match(cur, '"node":"([^"]*)"') or "") .. ":" .. (string.match(cur, '"run_id":"([^"]*)"') or ""))
  if not cur or not string.find(cur, '"status":"claimed"', 1, true) then
    redis.call("ZREM", K[5], id) -- finished, or trimmed: nothing to say
  elseif redis.call("GET", K[1]) ~= owner then
    local s = tonumber(string.match(cur, '"slot":(%d+)') or "0")
    local rec = string.gsub(cur, '"status":"claimed","reason":"[^"]*"', '"status":"unknown","reason":' ..
      q("no result within lock_ttl and the answer window: its node died or its finish was lost; it may have run"), 1)
    put(id, s > 0 and s or math.floor(now / 1000), rec)
    redis.call("ZREM", K[5], id)
    redis.call("HINCRBY", K[2], "unknown", 1)
    unknown[#unknown + 1] = id
  end
end
flush()
if #A < 11 then return {at, 0, at, now, {}, seq, runs, repaired, unknown} end
if tonumber(A[1]) ~= at then return {at, 1, at, now, {}, seq, runs, repaired, unknown} end
local done = tonumber(A[7]) > 0 and runs >= tonumber(A[7])
local missed, to, wrote = {}, at, 0
for i = 11, #A do
  local s = tonumber(A[i])
  if s * 1000 + tonumber(A[2]) >= now then break end
  if s > to then
    if redis.call("HEXISTS", K[3], A[i]) == 0 then
      wrote = wrote + 1
      if lost_at > 0 and s * 1000 <= lost_at + early then
        put(A[i], s, record(A[i], s, "skipped", "state_lost", A[3], 0, "schedule", ""))
      elseif done then
        put(A[i], s, record(A[i], s, "skipped", "max_runs", A[3], 0, "schedule", ""))
      else
        put(A[i], s, record(A[i], s, "missed", A[4], A[3], 0, "schedule", ""))
        missed[#missed + 1] = s
      end
    end
    to = s
  end
end
W.audited_to = to
flush()
if wrote > 0 then trim(tonumber(A[5]), tonumber(A[6]), wrote + 10, tonumber(A[2]), 0) end
return {at, 0, to, now, missed, seq, runs, repaired, unknown}
`, false)

// renewScript is compare-and-PEXPIRE (R3): when renewed it returns the
// pending slot P (0 = none; overlap queue and replace), -1 when another
// owner holds the lease. A lease held by nobody is taken again, -2 − P: its
// holder only renews while its run goes on and before its local deadline
// (which lies ahead of the lease's expiry), so the lease can only be gone
// because Redis lost it (R5). Taken again, it keeps the slots claimed
// after the loss from starting beside that run.
//
//	KEYS: 1 lease, 2 pending; ARGV: 1 owner, 2 ttl ms
var renewScript = newScript(`
local cur = redis.call("GET", KEYS[1])
if cur == ARGV[1] then
  redis.call("PEXPIRE", KEYS[1], ARGV[2])
  return tonumber(redis.call("GET", KEYS[2]) or "0")
end
if cur then return -1 end
redis.call("SET", KEYS[1], ARGV[1], "PX", ARGV[2])
return -2 - tonumber(redis.call("GET", KEYS[2]) or "0")
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
// runs it, or R7 expires it).
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
