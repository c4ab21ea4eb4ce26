package engine

import (
	"context"
	"errors"
	"reflect"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/cronlock/cronlock/config"
	"go.uber.org/zap"
)

// reload handles SIGHUP: RELOADING=1, load and validate the file; on any
// problem keep the old config and log one line with every problem;
// otherwise apply added, removed and changed jobs without disturbing
// running runs; then READY=1. Node, lock, redis, log, http, notify and output settings need a restart:
// a change there is logged and ignored.
func (e *Engine) reload(ctx context.Context) {
	e.opts.Notify(daemon.SdNotifyReloading + "\n" + daemon.SdNotifyMonotonicUsec())
	defer e.opts.Notify("READY=1\nSTATUS=" + e.status())
	e.log.Info("reloading configuration", zap.String("path", e.cfg.Path))
	cfg, err := e.opts.Reload()
	if err != nil {
		e.logRejected(err)
		return
	}
	for _, w := range cfg.Warnings {
		e.log.Warn("config warning", zap.String("problem", w.String()))
	}
	e.warnRestartOnly(cfg)
	if f := cfg.HTTP.TokenFile; f != "" && f == e.cfg.HTTP.TokenFile && e.apiToken.Load() != nil {
		reloadToken(e.log, &e.apiToken, f) // a rotated token applies at once
	}
	if err := e.applyJobs(ctx, cfg.Jobs); err != nil {
		e.log.Error("reload interrupted", zap.Error(err))
		return
	}
	before := e.jobHashes()
	e.cfg.Jobs = cfg.Jobs
	jobs := cfg.Jobs
	e.jobsNow.Store(&jobs)
	e.health.setJobs(cfg.Jobs)
	e.noteKillGrace(cfg.Jobs)
	hashes := config.JobHashes(cfg.Jobs)
	hash := config.ConfigHash(hashes)
	e.recordReload(ctx, before, hashes)
	if e.node != nil {
		if err := e.node.SetJobs(ctx, hashes, hash); err != nil {
			e.log.Error("reload: the heartbeat record keeps the previous job hashes", zap.Error(err))
		}
	}
	e.log.Info("configuration reloaded", zap.Int("jobs", len(cfg.Jobs)), zap.String("config_hash", hash))
	releaseLoadGarbage()
}

// logRejected logs a rejected reload as one error line: every problem of
// a *config.ValidationError in the field problems (one string each,
// warnings included), any other error (the file could not be read) in
// error.
func (e *Engine) logRejected(err error) {
	const msg = "reload rejected; keeping the running configuration"
	var ve *config.ValidationError
	if !errors.As(err, &ve) {
		e.log.Error(msg, zap.Error(err))
		return
	}
	problems := make([]string, len(ve.Problems))
	for i, p := range ve.Problems {
		problems[i] = p.String()
	}
	e.log.Error(msg, zap.String("file", ve.File), zap.Strings("problems", problems))
}

func (e *Engine) warnRestartOnly(cfg *config.Config) {
	for name, pair := range map[string][2]any{
		"node": {e.cfg.Node, cfg.Node}, "lock": {e.cfg.Lock, cfg.Lock}, "redis": {e.cfg.Redis, cfg.Redis},
		"log": {e.cfg.Log, cfg.Log}, "http": {e.cfg.HTTP, cfg.HTTP}, "notify": {e.cfg.Notify, cfg.Notify}, "output": {outputKeys(e.cfg), outputKeys(cfg)},
	} {
		if !reflect.DeepEqual(pair[0], pair[1]) && !(name == "node" && sameNode(e.cfg.Node, cfg.Node)) {
			e.log.Warn("changed settings need a restart to take effect", zap.String("section", name))
		}
	}
}

// sameNode ignores a regenerated default node id.
func sameNode(a, b config.Node) bool {
	b.ID, b.Location = a.ID, a.Location
	return reflect.DeepEqual(a, b) && a.Location.String() == b.Location.String()
}
