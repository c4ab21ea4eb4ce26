package ledger

// Skip reasons (docs/protocol.md, "Skip reasons").
const (
	SkipClaimedElsewhere = "claimed_elsewhere"
	SkipOverlap          = "overlap"
	SkipOverlapLocal     = "overlap_local"
	SkipPaused           = "paused"
	SkipRedisError       = "redis_error"
	SkipDisabled         = "disabled"
	SkipShuttingDown     = "shutting_down"
	// SkipRedisUnsafe: the Redis policy guard refuses claims on this Redis
	// (an evicting maxmemory-policy, a Cluster node used as a standalone
	// server); docs/protocol.md, "Redis policy guard".
	SkipRedisUnsafe = "redis_unsafe"
	// SkipClockSkew: Redis time was outside the slot's claim window when
	// this node's claim arrived (docs/protocol.md, rule R2) and this node's
	// clock differs from Redis's by more than node.max_clock_skew; nothing
	// was recorded.
	SkipClockSkew = "clock_skew"
	// SkipClaimLate: a scheduled claim reached Redis after the slot's answer
	// window while this node's clock agrees with Redis's: the claim itself
	// came late (this node or Redis overloaded or paused; rule R2); nothing
	// was recorded.
	SkipClaimLate = "claim_late"
	// SkipOutsideClaimWindow: a catch-up or backfill claim outside its
	// window in Redis time (rule R2).
	SkipOutsideClaimWindow = "outside_claim_window"
	// SkipNoRecord: a backfill slot without a record, due before the
	// job's ledger began: it may have run (-force runs it).
	SkipNoRecord = "no_record"
	// SkipStateLost: the ledger may have lost the slot's record (rule R5).
	SkipStateLost = "state_lost"
	// SkipOutsideRetention: a backfill slot older than the ledger keeps.
	SkipOutsideRetention = "outside_retention"
	// SkipLockLost: a won claim whose lease or answer window ran out
	// before its process started (rule R3).
	SkipLockLost = "lock_lost"
	// SkipExpired: a pending slot (overlap queue or replace) that a later
	// slot overtook (rule R7).
	SkipExpired = "expired"
	// SkipNotReplicated: a won claim that fewer replicas than
	// redis.min_replicas_acked acknowledged in time: a failover could
	// forget it, so the slot is not run and the lease is released.
	SkipNotReplicated = "not_replicated"
	// SkipAlreadyRun: a backfill slot that an earlier backfill ran (it is
	// listed, not counted: `cronlock backfill` is no daemon).
	SkipAlreadyRun = "already_run"
	// SkipMaxRuns: the job has made its max_runs successful runs in the
	// cluster (counted in Redis): it is done.
	SkipMaxRuns = "max_runs"
)

// Run results; a hook sees them as CRONLOCK_RESULT.
const (
	ResultSuccess  = "success"
	ResultFailure  = "failure"
	ResultTimeout  = "timeout"
	ResultLockLost = "lock_lost"
	ResultError    = "error"
	// ResultReplaced: the run was terminated (SIGTERM, SIGKILL after
	// kill_grace) because a newer slot replaces it (overlap replace).
	ResultReplaced = "replaced"
)
