package engine

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"sync/atomic"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/cluster"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
)

// apiHandler returns the HTTP API (package api) for http.listen and the
// control socket, built at the first call (from the Run goroutine only):
// on the Redis backend over Redis, on the memory backend over this
// daemon's own state (memControl). The token file was checked by config
// validation; reading it again here fails the start if it changed since.
func (e *Engine) apiHandler() (http.Handler, error) {
	if e.apiH != nil {
		return e.apiH, nil
	}
	var token []byte
	if e.cfg.HTTP.TokenFile != "" {
		t, err := config.ReadToken(e.cfg.HTTP.TokenFile)
		if err != nil {
			return nil, errors.New("http.token_file: " + err.Error())
		}
		token = t
	}
	e.apiToken.Store(&token)
	o := api.Options{Log: e.log, Jobs: e.runningJobs, Token: func() []byte { return *e.apiToken.Load() },
		Auth: e.cfg.HTTP.Auth, NodeID: e.cfg.Node.ID, Now: e.opts.Now, Output: e.output,
		Followers: api.NewFollowers()} // one count for the API and the dashboard
	if e.mem != nil {
		o.Memory, o.Run, o.Where = e.mem, e.runHere, "memory backend of node "+e.cfg.Node.ID
	} else {
		o.Redis, o.Where = e.redisClient, e.cfg.Redis.Where()
	}
	e.apiH = api.New(o)
	e.webH = e.dashboard(o)
	return e.apiH, nil
}

// jobHashCache is config.JobHashes of one job configuration (jobsNow).
type jobHashCache struct {
	jobs   *[]config.Job
	hashes map[string]string
	hash   string
}

// runningHashes returns the job hashes and config hash of the running
// job configuration, computed once per configuration; safe from any
// goroutine.
func (e *Engine) runningHashes() (map[string]string, string) {
	jobs := e.jobsNow.Load()
	if c := e.hashCache.Load(); c != nil && c.jobs == jobs {
		return c.hashes, c.hash
	}
	h := config.JobHashes(*jobs)
	c := &jobHashCache{jobs: jobs, hashes: h, hash: config.ConfigHash(h)}
	e.hashCache.Store(c)
	return c.hashes, c.hash
}

// selfRecord is this daemon's node record as the memory backend's node
// list shows it (the Redis backend's heartbeat writes the same fields),
// written now; safe from any goroutine.
func (e *Engine) selfRecord() cluster.Record {
	host, _ := os.Hostname()
	every := e.cfg.Node.HeartbeatInterval
	if every <= 0 {
		every = cluster.DefaultHeartbeatEvery
	}
	jobs, hash := e.runningHashes()
	r := cluster.Record{NodeID: e.cfg.Node.ID, Instance: e.instance, Hostname: host, PID: os.Getpid(), Version: e.opts.Version,
		Started: e.started, Heartbeat: e.opts.Now().UTC(), EveryMs: every.Milliseconds(), TTLMs: 3 * every.Milliseconds(),
		ConfigHash: hash, Jobs: jobs, Running: e.metrics.Running(), Tags: e.cfg.Node.Tags}
	if e.opts.State != nil {
		r.StateDir = e.opts.State.Path()
	}
	return r
}

// reloadToken re-reads file (the unchanged http.token_file of a reload)
// into cur, the token the API accepts: a new content is logged at info
// (never the token itself); a file that cannot be read or holds no token
// keeps the old token, with an error line. Called by reload only.
func reloadToken(log *zap.Logger, cur *atomic.Pointer[[]byte], file string) {
	t, err := config.ReadToken(file)
	switch {
	case err != nil:
		log.Error("http.token_file unreadable at reload; the API keeps accepting the previous token", zap.Error(err))
	case !bytes.Equal(t, *cur.Load()):
		cur.Store(&t)
		log.Info("API token rotated from http.token_file: the previous token is refused from now on",
			zap.String("token_file", file))
	}
}

// runningJobs returns the running job configuration; safe from any
// goroutine (reload replaces it atomically).
func (e *Engine) runningJobs() []config.Job { return *e.jobsNow.Load() }

// redisClient returns the Redis backend's client, or why there is none yet
// (a Sentinel or Cluster client is created in the background).
func (e *Engine) redisClient() (*redislock.Redis, error) {
	if e.backend.redis == nil {
		return nil, errors.New("not the redis backend")
	}
	return e.backend.redis.Client()
}
