package ledger

import (
	"context"
	"errors"
	"strconv"
	"time"
)

// OutputStore keeps the output of runs beside their occurrence records and
// carries the output of runs in progress to any node (docs/api.md,
// "Output"). It is separate from Locker: the occurrence record keeps its
// short tail (MaxOutputTail) as before, and a backend without it still
// runs jobs. Every method makes one round trip (Redis) or one
// mutex-guarded access (memory) and blocks at most until ctx ends, except
// FollowOutput, which also waits up to block for a chunk.
//
// Output handed to a store is already redacted by the node that ran it.
// occ is the occurrence's ledger id (OccurrenceID: the slot, or m<token>).
type OutputStore interface {
	// StoreOutput keeps out as the output of job's occurrence occ,
	// replacing any output kept before, as long as the ledger keeps
	// records (keep, rule R9): for keep's age, and among the job's newest
	// keep.Max occurrences with kept output or hook results (the older ones
	// are deleted, output and hook results alike).
	StoreOutput(ctx context.Context, job, occ string, out []byte, keep Retention) error
	// Output returns the kept output of job's occurrence occ, or
	// ErrNoOutput when none is kept (the run printed nothing, had not ended,
	// output.max_bytes is 0, or the output passed its retention).
	Output(ctx context.Context, job, occ string) ([]byte, error)
	// PublishOutput appends c to the live output of job's occurrence occ
	// and keeps the live output ttl from now; c.ID is ignored. At most
	// MaxLiveChunks chunks are kept: older ones are dropped first.
	PublishOutput(ctx context.Context, job, occ string, c OutputChunk, ttl time.Duration) error
	// FollowOutput returns the live chunks of job's occurrence occ after
	// the chunk with id after ("" = from the first), oldest first, at most
	// FollowBatch. When there is none it waits up to block for one, then
	// returns none (nil, nil).
	FollowOutput(ctx context.Context, job, occ, after string, block time.Duration) ([]OutputChunk, error)
}

// OutputChunk is one piece of a run's live output: whole lines (a line
// longer than the process's line limit may come in pieces), what was
// dropped before them, or the end of the run.
type OutputChunk struct {
	// ID orders the chunks of one run; a follower passes the last one it
	// saw to FollowOutput.
	ID string
	// Data is output lines, each ending in "\n" (the redacted lines as the
	// daemon logged them; "\r" ends a line too). The last line may be
	// unfinished, going on in the next chunk, only when it is 16 KiB or
	// more, the run ended, or it was not finished one publish later.
	Data []byte
	// Seq numbers the chunks of a run as published, from 1; 0: unknown (a
	// publisher that did not number them). A follower from the start whose
	// first chunk has Seq > 1 missed chunks trimmed by MaxLiveChunks.
	Seq int64
	// Dropped is how many bytes of output the node dropped before Data
	// because the publisher could not keep up (a slow or unreachable
	// backend): the job never waits for its readers.
	Dropped int64
	// End marks the run's last chunk: no more output comes.
	End bool
}

// Text is the chunk as lines to show: a line saying how many bytes were
// dropped, if any, then Data.
func (c OutputChunk) Text() []byte {
	if c.Dropped == 0 {
		return c.Data
	}
	note := "[cronlock: " + strconv.FormatInt(c.Dropped, 10) + " bytes of output dropped here: the live output could not keep up]\n"
	return append([]byte(note), c.Data...)
}

// MaxLiveChunks bounds the live output kept per run (XADD MAXLEN ~ on
// Redis); with chunks of at most 64 KiB that is at most about 8 MiB.
const MaxLiveChunks = 128

// FollowBatch is the most chunks one FollowOutput returns: with chunks of
// at most 64 KiB, one read of a follower holds at most 256 KiB, however
// much output the run has kept (a follower starts from the first chunk).
const FollowBatch = 4

// ErrNoOutput means no output is kept for the occurrence.
var ErrNoOutput = errors.New("ledger: no output kept")
