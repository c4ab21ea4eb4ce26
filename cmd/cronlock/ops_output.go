package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/ledger"
)

// logsPoll is how often `logs -f` looks for a run to start.
const logsPoll = 500 * time.Millisecond

// runLogs implements `cronlock logs [-config FILE] [-f] JOB`: the output of
// the job's last finished run, or with -f the output of its running run as
// it comes (waiting for the next run when none runs), until it ends.
func runLogs(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("logs", "[-config FILE] [-f] JOB", env)
	follow := f.fs.Bool("f", false, "follow the running run's output until it ends (waits for the next run when none runs)")
	if code := f.parse(args); code >= 0 {
		return code
	}
	if code := f.oneJob(); code >= 0 {
		return code
	}
	s, code, err := openOps("logs", f.config, memoryDaemon, env)
	if s == nil {
		return opsFail(env, "logs", code, err)
	}
	defer s.close()
	job := f.args[0]
	if _, err := s.job(job); err != nil {
		return opsFail(env, "logs", 1, err)
	}
	if !*follow {
		cctx, cancel := s.call(ctx)
		defer cancel()
		rows, err := s.occurrences(cctx, job, api.OccurrenceQuery{To: time.Now().Unix(), Status: "ran", Limit: 1})
		if err != nil {
			return opsFail(env, "logs", 1, err)
		}
		if len(rows) == 0 {
			return opsFail(env, "logs", 1, fmt.Errorf("job %s has no finished run in its ledger", job))
		}
		return s.printOutput(cctx, env, "logs", job, rows[0].ID)
	}
	id, err := s.awaitRun(ctx, job)
	if err != nil {
		return opsFail(env, "logs", 1, err)
	}
	err = s.followOutput(ctx, job, id, func(c ledger.OutputChunk) error {
		_, err := env.stdout.Write(c.Text())
		return err
	})
	if err != nil {
		return opsFail(env, "logs", 1, err)
	}
	return 0
}

// awaitRun returns the id of job's running occurrence, waiting for one to
// start when none runs (until ctx ends).
func (s *opsSession) awaitRun(ctx context.Context, job string) (string, error) {
	for {
		cctx, cancel := s.call(ctx)
		rows, err := s.occurrences(cctx, job, api.OccurrenceQuery{To: time.Now().Unix() + 1, Status: "claimed", Limit: 1})
		cancel()
		if err != nil {
			return "", err
		}
		if len(rows) > 0 {
			return rows[0].ID, nil
		}
		t := time.NewTimer(logsPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return "", ctx.Err()
		case <-t.C:
		}
	}
}

// outputSlot reads history's -output SLOT: Unix seconds, RFC 3339, or
// m<token> (a manual run).
func outputSlot(v string) (string, error) {
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return strconv.FormatInt(t.Unix(), 10), nil
	}
	id, _, err := api.OccurrenceID(v)
	if err != nil {
		return "", fmt.Errorf("-output %q: want the slot in Unix seconds or RFC 3339 (2026-12-01T02:00:00Z), or m<token> for a manual run", v)
	}
	return id, nil
}

// printOutput prints the stored output of job's occurrence id.
func (s *opsSession) printOutput(ctx context.Context, env *runEnv, op, job, id string) int {
	b, err := s.storedOutput(ctx, job, id)
	if errors.Is(err, ledger.ErrNoOutput) {
		return opsFail(env, op, 1, fmt.Errorf("no output kept for %s occurrence %s: the run printed nothing, did not run or has not "+
			"ended (cronlock logs -f %s), output.max_bytes is 0, or it is older than ledger.retention", job, id, job))
	}
	if err != nil {
		return opsFail(env, op, 1, err)
	}
	_, _ = env.stdout.Write(b)
	return 0
}

// storedOutput reads a stored output from Redis or the daemon.
func (s *opsSession) storedOutput(ctx context.Context, job, id string) ([]byte, error) {
	if s.daemon == nil {
		b, err := s.redis.Output(ctx, job, id)
		if errors.Is(err, ledger.ErrNoOutput) {
			return nil, err
		}
		return b, s.redisHint(err)
	}
	res, err := s.daemon.get(ctx, jobPath(job, "/occurrences/"+id+"/output"))
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode == http.StatusNotFound {
		return nil, ledger.ErrNoOutput
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("daemon on control socket %s: %s", s.daemon.socket, res.Status)
	}
	return io.ReadAll(io.LimitReader(res.Body, 64<<20))
}

// followOutput sends the live output of job's occurrence id to send until
// its end: through Redis, or the daemon's event stream.
func (s *opsSession) followOutput(ctx context.Context, job, id string, send func(ledger.OutputChunk) error) error {
	if s.daemon == nil {
		return s.redisHint(api.FollowOutput(ctx, s.redis, s.redis, job, id, "", time.Now, send))
	}
	res, err := s.daemon.get(ctx, jobPath(job, "/occurrences/"+id+"/output?follow=1"))
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("daemon on control socket %s: %s", s.daemon.socket, res.Status)
	}
	return readEvents(res.Body, send)
}

// readEvents reads a text/event-stream of output (api.WriteEvent) into
// chunks, until the end event.
func readEvents(r io.Reader, send func(ledger.OutputChunk) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var data []string
	event := ""
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if event == "end" {
				return send(ledger.OutputChunk{End: true})
			}
			if len(data) > 0 {
				if err := send(ledger.OutputChunk{Data: []byte(strings.Join(data, "\n") + "\n")}); err != nil {
					return err
				}
			}
			data, event = nil, ""
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the daemon ended the output stream before the run's end")
}
