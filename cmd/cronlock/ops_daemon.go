package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
)

// daemonClient is the cronlock command's way to a daemon on the memory
// backend, whose state lives in its process: the HTTP API on the daemon's
// control socket (api.SocketName of the config file; engine serves it to
// the daemon's own user and root, who need no token).
type daemonClient struct {
	socket string // e.g. @cronlock/7b0e…
	config string // the config file's absolute path
	hc     *http.Client
}

// newDaemonClient returns the client of the daemon started with cfg's
// file. It does no I/O.
func newDaemonClient(cfg *config.Config) *daemonClient {
	socket := api.SocketName(cfg.Path)
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		abs = cfg.Path
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}, DisableKeepAlives: true}
	return &daemonClient{socket: socket, config: abs, hc: &http.Client{Transport: tr}}
}

// errNoDaemon is wrapped by the error of a call no daemon answered.
var errNoDaemon = errors.New("no cronlock daemon is running")

// call sends method path (under api.Prefix) with body as JSON (nil: none)
// and decodes the answer into out. An error answer becomes an error with
// the API's message and hint; no daemon listening, one naming the config
// file and what to do.
func (c *daemonClient) call(ctx context.Context, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://cronlock"+api.Prefix+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := c.hc.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return fmt.Errorf("%w with %s (memory backend: the state lives in the daemon process, which the cronlock "+
				"command reaches on the control socket named after the config file, %s): start the daemon with this "+
				"file (cronlock -config %s), or give the -config path the daemon was started with", errNoDaemon,
				c.config, c.socket, c.config)
		}
		return fmt.Errorf("daemon on control socket %s: %w", c.socket, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("daemon on control socket %s: %w", c.socket, err)
	}
	if res.StatusCode >= 300 {
		var e api.Error
		if json.Unmarshal(data, &e) != nil || e.Error == "" {
			return fmt.Errorf("daemon on control socket %s: %s: %s", c.socket, res.Status, bytes.TrimSpace(data))
		}
		if e.Hint != "" {
			return fmt.Errorf("%s (%s)", e.Error, e.Hint)
		}
		return errors.New(e.Error)
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("daemon on control socket %s: unexpected answer to %s %s: %w", c.socket, method, path, err)
	}
	return nil
}

// get sends GET path (under api.Prefix, with its query) and returns the
// answer as it is, its body to be closed by the caller (for answers that
// are not JSON: a run's output, an event stream).
func (c *daemonClient) get(ctx context.Context, path string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://cronlock"+api.Prefix+path, nil)
	if err != nil {
		return nil, err
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("daemon on control socket %s: %w", c.socket, err)
	}
	return res, nil
}

// jobPath is the API path of job's resource (sub: "", "/runs", …).
func jobPath(job, sub string) string { return "jobs/" + url.PathEscape(job) + sub }

// jobs returns the status of the named jobs, all of them when names is
// empty.
func (c *daemonClient) jobs(ctx context.Context, names []string) ([]api.JobStatus, error) {
	var rows []api.JobStatus
	if len(names) == 0 {
		err := c.call(ctx, "GET", "jobs", nil, &rows)
		return rows, err
	}
	for _, n := range names {
		var row api.JobStatus
		if err := c.call(ctx, "GET", jobPath(n, ""), nil, &row); err != nil {
			return nil, err
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// runs returns job's last n runs, newest first, with their output tails.
func (c *daemonClient) runs(ctx context.Context, job string, n int) ([]*api.Run, error) {
	var rows []*api.Run
	err := c.call(ctx, "GET", jobPath(job, "/runs?limit="+strconv.Itoa(n)), nil, &rows)
	return rows, err
}

// occurrences returns job's ledger records that q selects, newest first.
func (c *daemonClient) occurrences(ctx context.Context, job string, q api.OccurrenceQuery) ([]ledger.Occurrence, error) {
	var rows []ledger.Occurrence
	v := url.Values{"from": {strconv.FormatInt(q.From, 10)}, "to": {strconv.FormatInt(q.To, 10)},
		"status": {q.Status}, "limit": {strconv.Itoa(q.Limit)}}
	err := c.call(ctx, "GET", jobPath(job, "/occurrences?"+v.Encode()), nil, &rows)
	return rows, err
}

// events returns job's last n events, newest first.
func (c *daemonClient) events(ctx context.Context, job string, n int) ([]api.Event, error) {
	var rows []api.Event
	err := c.call(ctx, "GET", jobPath(job, "/events?limit="+strconv.Itoa(n)), nil, &rows)
	return rows, err
}

// nodes returns the daemon's node list: the daemon itself.
func (c *daemonClient) nodes(ctx context.Context) (*api.Cluster, error) {
	var v api.Cluster
	err := c.call(ctx, "GET", "nodes", nil, &v)
	return &v, err
}

// pause pauses job as spec says; the daemon records the pause (its clock
// sets when, and the end of a -for) and returns it.
func (c *daemonClient) pause(ctx context.Context, job string, spec api.PauseSpec) (ledger.Pause, error) {
	body := map[string]string{"note": spec.Note}
	if spec.ForSet {
		body["for"] = spec.For.String()
	}
	if !spec.Until.IsZero() {
		body["until"] = spec.Until.UTC().Format(time.RFC3339Nano)
	}
	var res struct {
		Pause ledger.Pause `json:"pause"`
	}
	err := c.call(ctx, "POST", jobPath(job, "/pause"), body, &res)
	return res.Pause, err
}

// resume lifts job's pause and returns the pause lifted, nil when the job
// was not paused.
func (c *daemonClient) resume(ctx context.Context, job string) (*ledger.Pause, error) {
	var res struct {
		Lifted *ledger.Pause `json:"lifted"`
	}
	err := c.call(ctx, "POST", jobPath(job, "/resume"), map[string]string{}, &res)
	return res.Lifted, err
}

// run asks the daemon to run job now (POST …/run); with wait the answer
// comes once the run ended or was refused.
func (c *daemonClient) run(ctx context.Context, job string, rf runFlags) (ledger.RunStatus, error) {
	var res struct {
		Status ledger.RunStatus `json:"status"`
	}
	err := c.call(ctx, "POST", jobPath(job, "/run"), map[string]any{"force": rf.force, "wait": rf.wait, "reason": rf.reason}, &res)
	return res.Status, err
}

// describe names the daemon for an output header: its node id, pid and
// host from its node record, the socket and the config file.
func (c *daemonClient) describe(v *api.Cluster) string {
	who := "daemon"
	if v != nil && len(v.Nodes) == 1 {
		r := v.Nodes[0].Record
		who = fmt.Sprintf("daemon %s (pid %d on %s, %s)", r.NodeID, r.PID, r.Hostname, versionOf(r))
	}
	return fmt.Sprintf("memory backend: %s, on control socket %s of %s", who, c.socket, c.config)
}

// versionOf is a node record's version, or "version unknown".
func versionOf(r cluster.Record) string {
	if r.Version == "" {
		return "version unknown"
	}
	return r.Version
}
