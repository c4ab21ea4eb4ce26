package engine

import (
	"errors"
	"net/http"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
)

// apiHandler builds the HTTP API (package api) for http.listen; nil for
// the memory backend, whose state other processes cannot see. The token
// file was checked by config validation; reading it again here fails the
// start if it changed since.
func (e *Engine) apiHandler() (http.Handler, error) {
	if e.backend.kind != "redis" {
		return nil, nil
	}
	var token []byte
	if e.cfg.HTTP.TokenFile != "" {
		t, err := config.ReadToken(e.cfg.HTTP.TokenFile)
		if err != nil {
			return nil, errors.New("http.token_file: " + err.Error())
		}
		token = t
	}
	return api.New(api.Options{Log: e.log, Jobs: e.runningJobs, Redis: e.redisClient, Token: token,
		Auth: e.cfg.HTTP.Auth, NodeID: e.cfg.Node.ID, Now: e.opts.Now}), nil
}

// runningJobs returns the running job configuration; safe from any
// goroutine (reload replaces it atomically).
func (e *Engine) runningJobs() []config.Job { return *e.jobsNow.Load() }

// redisClient returns the Redis backend's client, or why there is none yet
// (a Sentinel or Cluster client is created in the background).
func (e *Engine) redisClient() (*redislock.Redis, error) {
	switch b := e.backend.Backend.(type) {
	case *redislock.Redis:
		return b, nil
	case *lazyRedis:
		return b.client()
	}
	return nil, errors.New("not the redis backend")
}
