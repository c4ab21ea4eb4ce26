package engine

import (
	"bytes"
	"errors"
	"net/http"
	"sync/atomic"

	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/redislock"
	"go.uber.org/zap"
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
	e.apiToken.Store(&token)
	return api.New(api.Options{Log: e.log, Jobs: e.runningJobs, Redis: e.redisClient,
		Token: func() []byte { return *e.apiToken.Load() },
		Auth:  e.cfg.HTTP.Auth, NodeID: e.cfg.Node.ID, Now: e.opts.Now}), nil
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
	switch b := e.backend.Backend.(type) {
	case *redislock.Redis:
		return b, nil
	case *lazyRedis:
		return b.client()
	}
	return nil, errors.New("not the redis backend")
}
