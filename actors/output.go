package actors

import (
	"bytes"
	"context"
	"sync"
	"time"

	"github.com/cronlock/cronlock/ledger"
	"github.com/cronlock/cronlock/process"
	"go.uber.org/zap"
)

// Live output (docs/api.md, "Output"): the lines of a run, redacted by the
// process package, go into a bounded queue (outQueue) that the run's
// publisher goroutine empties every PublishEvery, or as soon as
// flushBytes wait, into the backend's live output. The queue drops what
// does not fit and says so in the next chunk: neither a slow backend nor a
// slow reader ever slows the job. When the run ends, the last chunk (End)
// is published and the last output.max_bytes of the run (all attempts) are
// stored with the occurrence, before its finish makes it "ran".
const (
	// PublishEvery is how often the queued lines are published.
	PublishEvery = 150 * time.Millisecond
	// flushBytes queued wake the publisher before its tick.
	flushBytes = 16 << 10
	// maxQueued bounds the queue (and so a chunk): beyond it lines are
	// dropped and counted.
	maxQueued = 64 << 10
	// publishTimeout bounds one publish; storeTimeout the store at the end.
	publishTimeout = time.Second
	storeTimeout   = 2 * time.Second
	// LiveTTL keeps a run's live output after each chunk; LiveAfterEnd
	// after its last.
	LiveTTL      = 10 * time.Minute
	LiveAfterEnd = time.Minute
)

// outQueue is the bounded queue between a run's output readers (two
// goroutines: Add) and its publisher (Take). Safe for concurrent use.
type outQueue struct {
	mu      sync.Mutex
	buf     []byte
	dropped int64
	max     int
	kept    bool          // the last Take kept an unfinished line
	wake    chan struct{} // 1-buffered: flushBytes are waiting
}

func newOutQueue(max int) *outQueue { return &outQueue{max: max, wake: make(chan struct{}, 1)} }

// Add queues line and, unless partial, a "\n"; a line that does not fit in
// what is left of the bound is dropped whole and counted. It never blocks.
func (q *outQueue) Add(line []byte, partial bool) {
	n := len(line)
	if !partial {
		n++
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.buf)+n > q.max {
		q.dropped += int64(n)
		return
	}
	q.buf = append(q.buf, line...)
	if !partial {
		q.buf = append(q.buf, '\n')
	}
	if len(q.buf) >= flushBytes {
		select {
		case q.wake <- struct{}{}:
		default:
		}
	}
}

// Take returns the queued bytes up to the last line end and the count
// dropped since the last Take, and empties the queue but for the rest: a
// line still being written goes out whole with a later Take, because the
// readers end each chunk with a line end (a line cut in two would show as
// two). The rest goes out too with end, when it is flushBytes or more (a
// longer line shows in pieces), or when the previous Take kept some and no
// line has ended since (a prompt or a progress bar shows one publish
// later, not never). A "\r" at the very end is kept: it may begin "\r\n".
func (q *outQueue) Take(end bool) (data []byte, dropped int64) {
	q.mu.Lock()
	defer q.mu.Unlock()
	cut := len(q.buf)
	if !end {
		i := bytes.LastIndexAny(q.buf, "\n\r")
		if i >= 0 && i == len(q.buf)-1 && q.buf[i] == '\r' {
			i = bytes.LastIndexAny(q.buf[:i], "\n\r")
		}
		if rest := len(q.buf) - (i + 1); rest > 0 && rest < flushBytes && (i >= 0 || !q.kept) {
			cut = i + 1
		}
	}
	data, rest, dropped := q.buf[:cut:cut], q.buf[cut:], q.dropped
	q.buf, q.dropped, q.kept = nil, 0, len(rest) > 0
	if q.kept {
		q.buf = append([]byte(nil), rest...) // data is the caller's now
	}
	return data, dropped
}

// runOutput is one run's output beyond the process's tail: the Redactor
// of the job, the kept bytes (output.max_bytes) and the live queue with
// its publisher. The run goroutine calls start and stop; the process's
// reader goroutines call line.
type runOutput struct {
	store     ledger.OutputStore // nil: only redacted and logged
	job, occ  string
	redactor  *process.Redactor
	kept      *process.Tail // nil: max_bytes 0
	queue     *outQueue
	log       *zap.Logger
	done      chan struct{} // closed by stop: the publisher returns
	stopped   chan struct{} // closed by the publisher when it returns
	published int64         // chunks published (publisher, then stop): the next one's Seq - 1
	failed    bool          // a publish failed (logged once)
}

// newRunOutput returns the output of run r (its occurrence known: slot or
// fencing token), or nil when there is nothing to do beyond the process's
// own logging.
func (r *run) newRunOutput() *runOutput {
	red := process.NewRedactor(r.job.Env, r.deps.Redact)
	if red == nil && r.deps.Output == nil {
		return nil
	}
	o := &runOutput{redactor: red, log: r.logger()}
	if r.deps.Output != nil {
		o.store, o.job, o.occ = r.deps.Output, r.job.Name, ledger.OccurrenceID(unixOrZero(r.info.Slot), r.info.Fence)
		o.queue = newOutQueue(maxQueued)
		if r.deps.OutputMaxBytes > 0 {
			o.kept = process.NewTail(r.deps.OutputMaxBytes)
		}
	}
	return o
}

// apply sets spec's Redact and Lines.
func (o *runOutput) apply(spec *process.Spec) {
	if o == nil {
		return
	}
	if o.redactor != nil {
		spec.Redact = o.redactor
	}
	if o.store != nil {
		spec.Lines = o.line
	}
}

// line takes one redacted line from a reader goroutine.
func (o *runOutput) line(b []byte, partial bool) {
	if o.kept != nil {
		o.kept.WriteLine(b, !partial)
	}
	o.queue.Add(b, partial)
}

// start starts the publisher goroutine; stop ends it.
func (o *runOutput) start() {
	if o == nil || o.store == nil {
		return
	}
	o.done, o.stopped = make(chan struct{}), make(chan struct{})
	go o.publishLoop()
}

func (o *runOutput) publishLoop() {
	defer close(o.stopped)
	t := time.NewTicker(PublishEvery)
	defer t.Stop()
	for {
		select {
		case <-o.done:
			return
		case <-t.C:
		case <-o.queue.wake:
		}
		o.publish(false)
	}
}

// publish sends what is queued (and, with end, the end mark) as one chunk.
// A run that published nothing and ends publishes nothing: its readers
// find its stored output.
func (o *runOutput) publish(end bool) {
	data, dropped := o.queue.Take(end)
	if len(data) == 0 && dropped == 0 && (!end || o.published == 0) {
		return
	}
	ttl := LiveTTL
	if end {
		ttl = LiveAfterEnd
	}
	ctx, cancel := context.WithTimeout(context.Background(), publishTimeout)
	defer cancel()
	c := ledger.OutputChunk{Data: data, Dropped: dropped, End: end, Seq: o.published + 1}
	err := o.store.PublishOutput(ctx, o.job, o.occ, c, ttl)
	if err != nil {
		if !o.failed {
			o.failed = true
			o.log.Warn("live output not published (readers of the run's output miss this chunk; the job goes on)",
				zap.Int("bytes", len(data)), zap.Error(err))
		}
		o.queue.mu.Lock()
		o.queue.dropped += int64(len(data)) + dropped // the next chunk says what its readers missed
		o.queue.mu.Unlock()
		return
	}
	o.published++
}

// stop ends the publisher, publishes the rest with the end mark and
// stores the kept output for as long as the ledger keeps records (keep). It blocks up
// to publishTimeout + storeTimeout. A failure is logged: the occurrence's
// record keeps its tail regardless.
func (o *runOutput) stop(keep ledger.Retention) {
	if o == nil || o.store == nil {
		return
	}
	close(o.done)
	<-o.stopped
	o.publish(true)
	if o.kept == nil {
		return
	}
	out := o.kept.Bytes()
	if len(out) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
	defer cancel()
	if err := o.store.StoreOutput(ctx, o.job, o.occ, out, keep); err != nil {
		o.log.Warn("run output not stored (its occurrence keeps its 4 KiB tail)", zap.Int("bytes", len(out)), zap.Error(err))
	}
}
