package config

import (
	"testing"
	"time"
)

func TestJobHash_ChangesWithEveryFieldButEnvValues(t *testing.T) {
	base := Job{Name: "backup", Schedule: "0 3 * * *", Command: "run-backup", Shell: "/bin/sh", Enabled: true,
		Overlap: OverlapSkip, KillGrace: 10 * time.Second, Env: map[string]string{"DB_PASSWORD": "s3cret"}, Location: time.UTC}
	h := JobHash(base)
	if len(h) != 16 {
		t.Fatalf("JobHash = %q, want 16 hex digits", h)
	}
	changes := map[string]func(*Job){
		"schedule": func(j *Job) { j.Schedule = "0 4 * * *" },
		"command":  func(j *Job) { j.Command = "other" },
		"timeout":  func(j *Job) { j.Timeout = time.Minute },
		"retries":  func(j *Job) { j.Retries = 1 },
		"enabled":  func(j *Job) { j.Enabled = false },
		"env name": func(j *Job) { j.Env = map[string]string{"DB_PASSWORD": "s3cret", "X": "1"} },
		"zone":     func(j *Job) { j.Location = time.FixedZone("X", 3600) },
		"nodes":    func(j *Job) { j.Nodes = []string{"role=db"} },
		"max_runs": func(j *Job) { j.MaxRuns = 1 },
		"active":   func(j *Job) { j.ActiveUntil = "2030-01-01T00:00:00Z" },
		"warn":     func(j *Job) { j.WarnAfter = time.Minute },
		"webhook": func(j *Job) {
			j.Notify.Webhooks = []Webhook{{URL: "https://hooks.example/T1/B1/x", Events: NotifyEvents, Format: FormatJSON}}
		},
	}
	for what, change := range changes {
		j := base
		change(&j)
		if JobHash(j) == h {
			t.Errorf("%s changed: hash unchanged %s", what, h)
		}
	}
	hooked := base
	hooked.Notify.Webhooks = []Webhook{{URL: "https://u:pw1@hooks.example/T1/B1/x?token=a", Events: NotifyEvents, Format: FormatJSON}}
	hh := JobHash(hooked)
	for what, w := range map[string]Webhook{
		"path":   {URL: "https://u:pw1@hooks.example/T1/B1/y?token=a", Events: NotifyEvents, Format: FormatJSON},
		"format": {URL: "https://u:pw1@hooks.example/T1/B1/x?token=a", Events: NotifyEvents, Format: FormatSlack},
		"events": {URL: "https://u:pw1@hooks.example/T1/B1/x?token=a", Events: []string{EventMissed}, Format: FormatJSON},
		"signed": {URL: "https://u:pw1@hooks.example/T1/B1/x?token=a", Events: NotifyEvents, Format: FormatJSON, SecretFile: "/k"},
	} {
		j := hooked
		j.Notify.Webhooks = []Webhook{w}
		if JobHash(j) == hh {
			t.Errorf("webhook %s changed: hash unchanged %s", what, hh)
		}
	}
	j := hooked
	j.Notify.Webhooks = []Webhook{{URL: "https://v:pw2@hooks.example/T1/B1/x?token=b", Events: NotifyEvents, Format: FormatJSON}}
	if got := JobHash(j); got != hh {
		t.Errorf("only a webhook's credentials and query changed: hash %s, want %s (not hashed: secrets)", got, hh)
	}
	j, k := hooked, hooked
	w1 := Webhook{URL: "https://hooks.example/1", Events: []string{EventMissed, EventFailing}, Format: FormatJSON}
	w2 := Webhook{URL: "https://hooks.example/2", Events: NotifyEvents, Format: FormatSlack}
	j.Notify.Webhooks = []Webhook{w1, w2}
	w1.Events = []string{EventFailing, EventMissed}
	k.Notify.Webhooks = []Webhook{w2, w1}
	if JobHash(j) != JobHash(k) {
		t.Errorf("webhooks and their events in another order changed the hash")
	}
	j = base
	j.Nodes = []string{"b=1", "a=1"}
	k = base
	k.Nodes = []string{"a=1", "b=1"}
	if JobHash(j) != JobHash(k) {
		t.Errorf("nodes: selectors in another order changed the hash")
	}
	j = base
	j.Env = map[string]string{"DB_PASSWORD": "other"}
	if got := JobHash(j); got != h {
		t.Errorf("only an env value changed: hash %s, want %s (env values are not hashed)", got, h)
	}
}

func TestConfigHash_IndependentOfOrder(t *testing.T) {
	a := ConfigHash(map[string]string{"a": "1", "b": "2"})
	if b := ConfigHash(map[string]string{"b": "2", "a": "1"}); a != b {
		t.Errorf("got %s and %s for the same set", a, b)
	}
	if c := ConfigHash(map[string]string{"a": "1", "b": "3"}); c == a {
		t.Errorf("a changed job hash kept the config hash %s", a)
	}
}

func TestHeartbeatInterval_Bounds(t *testing.T) {
	for _, tt := range []struct{ v, want string }{
		{"1s", ""},
		{"50ms", `node.heartbeat_interval: 50ms is outside 100ms..1m0s; e.g. 5s (the default)`},
		{"2m", `node.heartbeat_interval: 2m0s is outside 100ms..1m0s; e.g. 5s (the default)`},
	} {
		got := render(problemsOf(t, "node: {heartbeat_interval: "+tt.v+"}\n"+job(""), "yaml", Options{}))
		switch {
		case tt.want == "" && len(got) > 0:
			t.Errorf("%s: got %q, want no problem", tt.v, got)
		case tt.want != "" && (len(got) != 1 || got[0] != tt.want):
			t.Errorf("%s: got %q, want %q", tt.v, got, tt.want)
		}
	}
}
