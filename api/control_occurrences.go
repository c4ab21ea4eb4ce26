package api

import (
	"context"
	"fmt"
	"slices"

	"github.com/cronlock/cronlock/ledger"
)

// Occurrence statuses a query may ask for (OccurrenceQuery.Status).
const (
	StatusAll    = ""       // every record
	StatusNotRun = "notrun" // skipped or missed: what did not run
)

// OccurrenceQuery selects ledger records (docs/protocol.md): slots in
// [From, To] (Unix seconds; a manual run counts by its claim time), of one
// status (ran, skipped, missed, claimed, queued, or StatusNotRun; "" =
// all), the newest Limit of them.
type OccurrenceQuery struct {
	From, To int64
	Status   string
	Limit    int
}

// Validate reports a query that cannot be answered, naming the field.
func (q OccurrenceQuery) Validate() error {
	switch {
	case q.To < q.From:
		return fmt.Errorf("to %d is before from %d", q.To, q.From)
	case q.Limit < 1 || q.Limit > 10000:
		return fmt.Errorf("limit %d: want 1..10000", q.Limit)
	case !slices.Contains([]string{StatusAll, StatusNotRun, "ran", "skipped", "missed", "claimed", "queued"}, q.Status):
		return fmt.Errorf("status %q: want ran, skipped, missed, claimed, queued or notrun", q.Status)
	}
	return nil
}

// Occurrences returns job's ledger records that q selects, newest first.
func Occurrences(ctx context.Context, r ReadStore, job string, q OccurrenceQuery) ([]ledger.Occurrence, error) {
	if err := q.Validate(); err != nil {
		return nil, err
	}
	occ, err := r.Occurrences(ctx, job, q.From, q.To)
	if err != nil {
		return nil, err
	}
	out := make([]ledger.Occurrence, 0, min(len(occ), q.Limit))
	for _, o := range slices.Backward(occ) {
		if len(out) == q.Limit {
			break
		}
		if q.Status == StatusAll || o.Status == q.Status || q.Status == StatusNotRun && (o.Status == "skipped" || o.Status == "missed") {
			out = append(out, o)
		}
	}
	return out, nil
}
