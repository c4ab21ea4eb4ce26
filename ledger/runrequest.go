package ledger

import "time"

// Run requests (docs/protocol.md, "Runs on the cluster"): `cronlock run
// JOB` writes a request that exactly one daemon holding the job takes and
// runs; the request's progress is its RunStatus. The Redis backend keeps
// them (redislock, runreq.go); package cluster takes them.

// RunStatusTTL is how long a job's run statuses are kept after the last
// write; PendingWindow how long a job stays in the pending set after a
// request (requests wait at most that long: MaxRunTimeout).
const (
	RunStatusTTL  = time.Hour
	PendingWindow = 10 * time.Minute
)

// Run request states.
const (
	RunPending   = "pending"   // written, not yet taken
	RunTaken     = "taken"     // popped by Node, handed to its job actor
	RunFinished  = "finished"  // ran: Result, ExitCode, RunID
	RunRefused   = "refused"   // did not start: Skip (a skip reason) and Error
	RunCancelled = "cancelled" // withdrawn by the requester before anyone took it
)

// RunRequest is one request of a manual run on the cluster.
type RunRequest struct {
	ID        string    `json:"id"`
	Job       string    `json:"job"`
	Requester string    `json:"requester"` // user@host
	Reason    string    `json:"reason,omitempty"`
	At        time.Time `json:"at"`
	Force     bool      `json:"force,omitempty"` // run even if paused or disabled
}

// RunStatus is the progress of one request.
type RunStatus struct {
	ID       string    `json:"id"`
	State    string    `json:"state"`
	Node     string    `json:"node,omitempty"`
	At       time.Time `json:"at"`
	RunID    string    `json:"run_id,omitempty"`
	Result   string    `json:"result,omitempty"`
	ExitCode int       `json:"exit_code"`
	Skip     string    `json:"skip,omitempty"`
	Error    string    `json:"error,omitempty"`
}
