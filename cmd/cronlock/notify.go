package main

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/notify"
)

// notifyTestPolicy is `cronlock notify test`'s: one attempt, so that the
// result of each webhook is reported at once.
var notifyTestPolicy = notify.Policy{Attempts: 1, Timeout: 10 * time.Second}

// runNotify is `cronlock notify test [-config FILE] [-job JOB] [-event
// EVENT]`: it sends a sample alert to each configured webhook (the
// top-level ones and every job's, or with -job that job's and the
// top-level ones) that receives the event, and prints one line per
// webhook. Exit 0 when every one answered 2xx, 1 when one failed or none
// is configured, 2 on a usage error.
func runNotify(ctx context.Context, args []string, env *runEnv) int {
	f := newOpsFlags("notify", "test [-config FILE] [-job JOB] [-event EVENT]", env)
	job := f.fs.String("job", "", "send as this job, to its webhooks and the top-level ones (default: every webhook, as job \"example\")")
	event := f.fs.String("event", config.EventFailing, "the sample's event: failing, recovered, missed or running_long")
	if code := f.parse(args); code >= 0 {
		return code
	}
	if len(f.args) != 1 || f.args[0] != "test" {
		fmt.Fprintln(env.stderr, "cronlock notify: want the action test")
		f.fs.Usage()
		return 2
	}
	if !slices.Contains(config.NotifyEvents, *event) {
		return opsFail(env, "notify test", 2, fmt.Errorf("unknown -event %q; want one of %v", *event, config.NotifyEvents))
	}
	cfg, code := loadConfig(f.config, config.ForValidate, nil, env)
	if cfg == nil {
		return code
	}
	hooks, name, err := testWebhooks(cfg, *job)
	if err != nil {
		return opsFail(env, "notify test", 2, err)
	}
	if len(hooks) == 0 {
		return opsFail(env, "notify test", 1, fmt.Errorf("no webhook is configured (notify.webhooks%s)", map[bool]string{true: " or the job's", false: ""}[*job != ""]))
	}
	now := env.clockNow()
	ev := notify.Event{Kind: *event, Job: name, Slot: now.Truncate(time.Minute), Node: cfg.Node.ID, RunID: "test",
		Reason: "a test alert sent by cronlock notify test", At: now}
	if *event == config.EventFailing || *event == config.EventRecovered {
		ev.Result, ev.ExitCode = "failure", 1
		if *event == config.EventRecovered {
			ev.Result, ev.ExitCode = "success", 0
		}
	}
	failed := 0
	for _, w := range hooks {
		failed += sendTest(ctx, env, w, ev)
	}
	if failed > 0 {
		fmt.Fprintf(env.stdout, "%d of %d webhook(s) failed\n", failed, len(hooks))
		return 1
	}
	return 0
}

// testWebhooks returns the webhooks `notify test` sends to and the job
// name of its sample: job's (and the top-level ones), or every distinct
// webhook of the config.
func testWebhooks(cfg *config.Config, job string) ([]config.Webhook, string, error) {
	if job != "" {
		i := slices.IndexFunc(cfg.Jobs, func(j config.Job) bool { return j.Name == job })
		if i < 0 {
			return nil, "", fmt.Errorf("no job %q in %s", job, cfg.Path)
		}
		return cfg.WebhooksFor(&cfg.Jobs[i]), job, nil
	}
	hooks := slices.Clone(cfg.Notify.Webhooks)
	for _, j := range cfg.Jobs {
		for _, w := range j.Notify.Webhooks {
			if !slices.ContainsFunc(hooks, func(h config.Webhook) bool {
				return h.URL == w.URL && h.SecretFile == w.SecretFile && h.Format == w.Format
			}) {
				hooks = append(hooks, w)
			}
		}
	}
	return hooks, "example", nil
}

// sendTest sends ev to w once and prints the result; it returns 1 when it
// failed.
func sendTest(ctx context.Context, env *runEnv, w config.Webhook, ev notify.Event) int {
	r, err := notify.NewReceiver(w)
	if err == nil && !r.Wants(ev.Kind) {
		fmt.Fprintf(env.stdout, "skip  %s: does not receive %s (events: %v)\n", r.Name(), ev.Kind, w.Events)
		return 0
	}
	if err == nil {
		_, err = r.Deliver(ctx, notify.NewClient(), ev, notifyTestPolicy)
	}
	if err != nil {
		fmt.Fprintf(env.stdout, "FAIL  %s: %v\n", r.Name(), err)
		return 1
	}
	signed := "unsigned"
	if r.Secret != nil {
		signed = "signed"
	}
	fmt.Fprintf(env.stdout, "ok    %s: %s sent (%s, %s)\n", r.Name(), ev.Kind, w.Format, signed)
	return 0
}
