package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// followBlock is how long one read of the live output waits before the
// follower checks whether the run has ended without an end mark.
const followBlock = time.Second

// OccurrenceID reads an occurrence id of a path: a slot in Unix seconds,
// or m<token> for a manual run. It returns the ledger id and the slot (0
// for a manual run).
func OccurrenceID(s string) (id string, slot int64, err error) {
	if rest, ok := strings.CutPrefix(s, "m"); ok {
		if t, err := strconv.ParseInt(rest, 10, 64); err == nil && t > 0 {
			return s, 0, nil
		}
	} else if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 {
		return s, n, nil
	}
	return "", 0, fmt.Errorf("%q is no occurrence: want its slot in Unix seconds (as in the occurrences' \"slot\"), or m<token> for a manual run", s)
}

// FindOccurrence returns job's occurrence id from the ledger, or nil when
// the ledger has none (yet, or any more).
func FindOccurrence(ctx context.Context, rd ReadStore, job, id string, now time.Time) (*ledger.Occurrence, error) {
	_, slot, err := OccurrenceID(id)
	if err != nil {
		return nil, err
	}
	from, to := slot, slot
	if slot == 0 {
		from, to = 0, now.Unix()
	}
	occ, err := rd.Occurrences(ctx, job, from, to)
	if err != nil {
		return nil, err
	}
	for i := range occ {
		if occ[i].ID == id {
			return &occ[i], nil
		}
	}
	return nil, nil
}

// FollowOutput sends job's occurrence id's live output to send, chunk by
// chunk, from the chunk after after ("" = the first still kept, after a
// line saying that earlier ones were trimmed, if so: noteTrimmed) until
// the run's end mark, then returns nil. A run that ended without live output (it was
// quicker than one publish, or its live output expired) sends its stored
// output, if any, and an end chunk. It blocks until then, ctx ends (its
// error) or send fails (that error). out carries the output, rd the
// ledger that says whether the run has ended.
func FollowOutput(ctx context.Context, rd ReadStore, out ledger.OutputStore, job, id, after string, now func() time.Time,
	send func(ledger.OutputChunk) error) error {
	for {
		chunks, err := out.FollowOutput(ctx, job, id, after, followBlock)
		if err != nil {
			return err
		}
		var ended bool
		if after, ended, err = sendChunks(chunks, after, send); err != nil || ended {
			return err
		}
		if len(chunks) > 0 {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		o, err := FindOccurrence(cctx, rd, job, id, now())
		cancel()
		if err != nil {
			return err
		}
		if o != nil && (o.Status == "claimed" || o.Status == "queued") {
			continue // running, or about to: quiet for now
		}
		return sendRest(ctx, out, job, id, after, send)
	}
}

// sendChunks sends chunks, read after the chunk after ("" = from the
// start: a note first when the stream's start was trimmed), up to and
// including an end mark. It returns the last chunk's id (after when none)
// and whether the end mark was sent.
func sendChunks(chunks []ledger.OutputChunk, after string, send func(ledger.OutputChunk) error) (last string, ended bool, err error) {
	if after == "" && len(chunks) > 0 {
		if err := noteTrimmed(chunks[0], send); err != nil {
			return after, false, err
		}
	}
	for _, c := range chunks {
		if err := send(c); err != nil {
			return after, false, err
		}
		if after = c.ID; c.End {
			return after, true, nil
		}
	}
	return after, false, nil
}

// sendRest ends a follow of a run that has ended: the chunks still to come
// (it may have published its last ones just now), else, when none came at
// all, the stored output, then the end.
func sendRest(ctx context.Context, out ledger.OutputStore, job, id, after string, send func(ledger.OutputChunk) error) error {
	chunks, err := out.FollowOutput(ctx, job, id, after, time.Millisecond)
	if err != nil {
		return err
	}
	if _, ended, err := sendChunks(chunks, after, send); err != nil || ended {
		return err
	}
	if after == "" && len(chunks) == 0 {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		b, err := out.Output(cctx, job, id)
		cancel()
		if err == nil {
			if err := send(ledger.OutputChunk{Data: b}); err != nil {
				return err
			}
		} else if !errors.Is(err, ledger.ErrNoOutput) {
			return err
		}
	}
	return send(ledger.OutputChunk{End: true})
}

// eventLines splits text into the data lines of one message at "\r\n",
// "\r" and "\n", the line ends of text/event-stream (the HTML standard,
// "Parsing an event stream"): output can then neither end a data: line
// early nor add a field (a lone "\r" before "event: end" would inject an
// end event). A line end at the end of text adds no empty line.
func eventLines(text string) []string {
	text = strings.ReplaceAll(strings.ReplaceAll(text, "\r\n", "\n"), "\r", "\n")
	return strings.Split(strings.TrimSuffix(text, "\n"), "\n")
}

// noteTrimmed sends, before c, the first chunk a follower from the start
// reads, a line saying that the chunks before it were trimmed
// (ledger.MaxLiveChunks), when its Seq says so.
func noteTrimmed(c ledger.OutputChunk, send func(ledger.OutputChunk) error) error {
	if c.Seq <= 1 {
		return nil
	}
	return send(ledger.OutputChunk{Data: fmt.Appendf(nil, "[cronlock: the run's first %d chunks of output were trimmed from its live output, "+
		"which keeps the last %d; its kept output (output.max_bytes) can be read once it ends]\n", c.Seq-1, ledger.MaxLiveChunks)})
}

// WriteEvent writes c as Server-Sent Events (the HTML standard's
// text/event-stream): its lines (eventLines: a carriage return ends a
// line too) as one message with the chunk's id, then,
// for the last chunk, an "end" event. It flushes, and returns the error
// of the write or the flush.
func WriteEvent(w http.ResponseWriter, c ledger.OutputChunk) error {
	var b bytes.Buffer
	if text := c.Text(); len(text) > 0 {
		if c.ID != "" {
			b.WriteString("id: " + c.ID + "\n")
		}
		for _, line := range eventLines(string(text)) {
			b.WriteString("data: " + line + "\n")
		}
		b.WriteString("\n")
	}
	if c.End {
		b.WriteString("event: end\ndata: \n\n")
	}
	if _, err := w.Write(b.Bytes()); err != nil {
		return err
	}
	if err := http.NewResponseController(w).Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	return nil
}

// ServeOutput answers a request for job's occurrence id's output: the
// stored output as text/plain, or with follow=1 the live output
// (ServeFollow, counted in f). It writes the answer, errors included (as
// JSON).
func ServeOutput(w http.ResponseWriter, r *http.Request, f *Followers, rd ReadStore, out ledger.OutputStore, job, id string, now func() time.Time) {
	if fl := r.URL.Query().Get("follow"); fl != "" && fl != "0" && fl != "false" {
		ServeFollow(w, r, f, rd, out, job, id, now)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callTimeout)
	defer cancel()
	b, err := out.Output(ctx, job, id)
	if errors.Is(err, ledger.ErrNoOutput) {
		writeHint(w, http.StatusNotFound, fmt.Sprintf("no output kept for job %s occurrence %s", job, id),
			"the run printed nothing, has not ended (follow it with ?follow=1), did not run, output.max_bytes is 0, "+
				"or its output is older than ledger.retention; GET "+Prefix+"jobs/"+job+"/occurrences lists the occurrences")
		return
	}
	if err != nil {
		writeHint(w, http.StatusServiceUnavailable, "output: "+err.Error(), "the daemon's log says more")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// ServeFollow answers with job's occurrence id's live output as
// text/event-stream (FollowOutput, WriteEvent: the chunks so far, the new
// ones, an end event) until the run's end or the client goes; a browser
// that reconnects resumes after its Last-Event-ID header's chunk. The
// follower is counted in f: beyond MaxFollowers or MaxFollowersPerRun it
// answers 429 (JSON, with Retry-After) instead; the control socket's
// followers are not counted. Each write has FollowWriteTimeout: a client
// that takes nothing for that long is cut off.
func ServeFollow(w http.ResponseWriter, r *http.Request, f *Followers, rd ReadStore, out ledger.OutputStore, job, id string, now func() time.Time) {
	if _, trusted := PeerOf(r); !trusted {
		leave, why := f.join(job, id)
		if leave == nil {
			w.Header().Set("Retry-After", "10")
			writeHint(w, http.StatusTooManyRequests, "too many live output followers: "+why,
				fmt.Sprintf("a daemon serves at most %d followers, %d per run; try again later, follow the run on another node, "+
					"or read its whole output once it has ended (without follow=1)", f.max, f.perRun))
			return
		}
		defer leave()
	}
	rc := http.NewResponseController(w)
	deadline := func() error {
		if err := rc.SetWriteDeadline(time.Now().Add(f.writeTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return err
		}
		return nil
	}
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }() // the response's end is written after this returns
	if deadline() != nil {
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no") // a proxy must not hold the stream back
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return
	}
	err := FollowOutput(r.Context(), rd, out, job, id, r.Header.Get("Last-Event-ID"), now,
		func(c ledger.OutputChunk) error {
			if err := deadline(); err != nil {
				return err
			}
			return WriteEvent(w, c)
		})
	if err != nil && r.Context().Err() == nil && deadline() == nil {
		_ = WriteEvent(w, ledger.OutputChunk{Data: []byte("[cronlock: the output could not be read further: " + err.Error() + "]\n"), End: true})
	}
}

// output answers GET /api/v1/jobs/{job}/occurrences/{slot}/output.
func (s *server) output(w http.ResponseWriter, r *http.Request) {
	j, ok := s.findJob(w, r)
	if !ok {
		return
	}
	id, _, err := OccurrenceID(r.PathValue("slot"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if s.o.Output == nil {
		writeHint(w, http.StatusNotImplemented, "this daemon keeps no run output", "")
		return
	}
	out, err := s.o.Output()
	if err != nil {
		s.redisError(w, fmt.Errorf("not reachable: %w", err))
		return
	}
	rd, _, cancel, ok := s.store(w, r)
	if !ok {
		return
	}
	cancel() // rd is used with the request's context below
	ServeOutput(w, r, s.o.Followers, rd, out, j.Name, id, s.o.Now)
}
