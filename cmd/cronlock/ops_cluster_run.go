package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cronlock/cronlock/ledger"

	"github.com/cronlock/cronlock/actors"
	"github.com/cronlock/cronlock/api"
	"github.com/cronlock/cronlock/config"
)

// runOnCluster asks the cluster to run job (`cronlock run` without
// -local): asked is false when no live daemon has the job, and the caller
// then runs it here. Otherwise code is the exit code: 0 once taken
// (without -wait), the run's exit code (with -wait), 1 when nobody took
// the request or the run was refused.
func (s *opsSession) runOnCluster(ctx context.Context, env *runEnv, j config.Job, rf runFlags) (code int, asked bool) {
	job := j.Name
	if ctx.Err() != nil {
		return opsFail(env, "run", 1, s.refusal(ctx, job, actors.Ran{Skip: ledger.SkipShuttingDown})), true
	}
	cctx, cancel := s.call(ctx)
	cluster, err := api.Nodes(cctx, s.redis, time.Now())
	cancel()
	if err != nil {
		return opsFail(env, "run", 1, s.redisHint(err)), true
	}
	holders := cluster.Holders(job, j.Nodes)
	if len(holders) == 0 {
		fmt.Fprintf(env.stderr, "cronlock run: no live daemon has %s in its configuration%s; running it here (as with -local)\n", job, tagsNote(j.Nodes))
		return 0, false
	}
	req := api.NewRunRequest(job, requester(env), rf.reason, rf.force, time.Now())
	st, err := api.RequestRun(ctx, s.redis, req, rf.timeout)
	switch {
	case errors.Is(err, api.ErrNotTaken):
		return opsFail(env, "run", 1, fmt.Errorf("no daemon took the run request of %s within %v; it was withdrawn and will not run "+
			"(live daemons with the job: %s; is it enabled there, and are they connected to Redis?)", job, rf.timeout,
			strings.Join(holders, ", "))), true
	case err != nil:
		return opsFail(env, "run", 1, s.redisHint(err)), true
	}
	fmt.Fprintf(env.stderr, "cronlock run: request %s of %s taken by %s\n", req.ID, job, st.Node)
	if !rf.wait {
		return 0, true
	}
	end, err := api.WaitRun(ctx, s.redis, job, req.ID)
	if errors.Is(err, api.ErrTakerGone) || errors.Is(err, api.ErrStatusLost) { // the run may not go on
		return opsFail(env, "run", 1, fmt.Errorf("%w; see cronlock history %s", err, job)), true
	}
	if err != nil {
		return opsFail(env, "run", 1, fmt.Errorf("waiting for request %s on %s: %w (the run goes on; see cronlock history %s)",
			req.ID, st.Node, err, job)), true
	}
	return s.reportRemote(ctx, env, job, end), true
}

// runOnDaemon asks the memory-backend daemon started with the config file
// to run job (`cronlock run` without -local): asked is false when no
// daemon runs with the file, and the caller then runs it here. Otherwise
// code is as runOnCluster's.
func (s *opsSession) runOnDaemon(ctx context.Context, env *runEnv, j config.Job, rf runFlags) (code int, asked bool) {
	st, err := s.daemon.run(ctx, j.Name, rf)
	switch {
	case errors.Is(err, errNoDaemon):
		fmt.Fprintf(env.stderr, "cronlock run: no daemon runs with %s; running %s here (as with -local)\n", s.daemon.config, j.Name)
		return 0, false
	case err != nil:
		return opsFail(env, "run", 1, err), true
	}
	if st.State == ledger.RunTaken {
		fmt.Fprintf(env.stderr, "cronlock run: %s running on the daemon %s (cronlock history %s shows it once it ended)\n", j.Name, st.Node, j.Name)
		return 0, true
	}
	return s.reportRemote(ctx, env, j.Name, &st), true
}

// reportRemote prints the end of a run on the cluster and returns its
// exit code.
func (s *opsSession) reportRemote(ctx context.Context, env *runEnv, job string, st *ledger.RunStatus) int {
	switch st.State {
	case ledger.RunRefused:
		err := s.refusal(ctx, job, actors.Ran{Skip: st.Skip, Err: errors.New(st.Error)})
		return opsFail(env, "run", 1, fmt.Errorf("on %s: %w", st.Node, err))
	case ledger.RunCancelled:
		return opsFail(env, "run", 1, fmt.Errorf("request %s was withdrawn", st.ID))
	}
	cctx, cancel := s.call(ctx)
	defer cancel()
	if recs, err := s.runs(cctx, job, 20, true); err == nil {
		for _, r := range recs {
			if r.RunID == st.RunID {
				fmt.Fprint(env.stdout, r.OutputTail)
			}
		}
	}
	fmt.Fprintf(env.stderr, "cronlock run: %s on %s: %s, exit code %d\n", job, st.Node, st.Result, st.ExitCode)
	switch {
	case st.ExitCode > 0:
		return st.ExitCode
	case st.Result != ledger.ResultSuccess:
		return 1
	}
	return 0
}

// tagsNote qualifies "a live daemon has the job" for a job with nodes:.
func tagsNote(selectors []string) string {
	if len(selectors) == 0 {
		return ""
	}
	return " and node.tags matching its nodes: " + strings.Join(selectors, ", ")
}
