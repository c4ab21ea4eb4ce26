package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestNotify_Rules(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte(" \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := Options{Purpose: ForStart}
	tests := []struct {
		name, yaml string
		want       string // substring of one problem line
	}{
		{"not a mapping", "notify: [1]\n" + job(""), `notify: want a mapping with webhooks`},
		{"unknown notify key", "notify: {webhook: []}\n" + job(""), `notify.webhook: unknown key "webhook" (did you mean "webhooks"?)`},
		{"webhooks not a list", "notify: {webhooks: x}\n" + job(""), `notify.webhooks: want a list of webhooks`},
		{"missing url", "notify: {webhooks: [{format: json}]}\n" + job(""), `notify.webhooks[0].url: missing url`},
		{"bad scheme", "notify: {webhooks: [{url: 'ftp://h/p'}]}\n" + job(""), `notify.webhooks[0].url: scheme "ftp" is not http or https`},
		{"relative url", "notify: {webhooks: [{url: '/hook'}]}\n" + job(""), `notify.webhooks[0].url: scheme "" is not http or https`},
		{"no host", "notify: {webhooks: [{url: 'http:///hook'}]}\n" + job(""), `notify.webhooks[0].url: no host`},
		{"unparsable url", "notify: {webhooks: [{url: 'http://h:x/%zz'}]}\n" + job(""), `notify.webhooks[0].url: not a URL`},
		{"unknown event", "notify: {webhooks: [{url: 'http://h/', events: [failing, broken]}]}\n" + job(""),
			`notify.webhooks[0].events[1]: unknown event "broken"; want one of failing, recovered, missed, running_long`},
		{"empty events", "notify: {webhooks: [{url: 'http://h/', events: []}]}\n" + job(""), `notify.webhooks[0].events: empty list`},
		{"unknown format", "notify: {webhooks: [{url: 'http://h/', format: teams}]}\n" + job(""), `notify.webhooks[0].format: unknown format "teams"`},
		{"unknown webhook key", "notify: {webhooks: [{url: 'http://h/', secret: x}]}\n" + job(""), `notify.webhooks[0].secret: unknown key "secret"`},
		{"missing secret file", "notify: {webhooks: [{url: 'http://h/', secret_file: '" + filepath.Join(dir, "nope") + "'}]}\n" + job(""),
			`notify.webhooks[0].secret_file: file "` + filepath.Join(dir, "nope") + `" does not exist on this host; create it`},
		{"empty secret file", "notify: {webhooks: [{url: 'http://h/', secret_file: '" + empty + "'}]}\n" + job(""),
			`notify.webhooks[0].secret_file: file "` + empty + `" holds no secret`},
		{"job webhook", job("  notify: {webhooks: [{url: 'gopher://h/'}]}\n"), `jobs[0] "j": notify.webhooks[0].url: scheme "gopher"`},
		{"notify in defaults", "defaults: {notify: {webhooks: [{url: 'http://h/'}]}}\n" + job(""), `defaults.notify: not allowed under defaults`},
		{"warn_after unit", job("  warn_after: 30\n"), `jobs[0] "j": warn_after: 30 needs a unit`},
		{"warn_after short", job("  warn_after: 10ms\n"), `jobs[0] "j": warn_after: 10ms is under 1s`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml), "yaml", start)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v\nwant a problem containing %q", err, tt.want)
			}
		})
	}
}

func TestNotify_SecretNeverEchoed(t *testing.T) {
	// A URL's token must not reach the problem text.
	_, err := Parse([]byte("notify: {webhooks: [{url: 'ftp://user:s3cr3t@h/p?token=t0k3n'}]}\n"+job("")), "yaml", Options{})
	if err == nil || strings.Contains(err.Error(), "s3cr3t") || strings.Contains(err.Error(), "t0k3n") {
		t.Errorf("got %v, want an error without the URL's credentials", err)
	}
}

func TestNotify_Valid(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("k3y\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	y := "notify: {webhooks: [{url: 'https://h/a', secret_file: '" + secret + "'}]}\n" +
		job("  warn_after: 5m\n  notify: {webhooks: [{url: 'http://h/b', events: [missed], format: slack}]}\n")
	cfg := mustParse(t, y, "yaml", Options{Purpose: ForStart})
	j := cfg.Jobs[0]
	if j.WarnAfter != 5*time.Minute {
		t.Errorf("warn_after: got %v, want 5m", j.WarnAfter)
	}
	got := cfg.WebhooksFor(&j)
	if len(got) != 2 || got[0].URL != "https://h/a" || got[1].URL != "http://h/b" {
		t.Fatalf("WebhooksFor: got %+v, want the global webhook then the job's", got)
	}
	if !slices.Equal(got[0].Events, NotifyEvents) || got[0].Format != FormatJSON || got[0].SecretFile != secret {
		t.Errorf("global webhook: got %+v, want every event, json, the secret file", got[0])
	}
	if !slices.Equal(got[1].Events, []string{EventMissed}) || got[1].Format != FormatSlack {
		t.Errorf("job webhook: got %+v, want [missed], slack", got[1])
	}
	if sec, err := ReadSecret(secret); err != nil || string(sec) != "k3y" {
		t.Errorf("ReadSecret: got %q, %v, want k3y", sec, err)
	}
}

func TestNotify_SecretFileWarningAtValidate(t *testing.T) {
	y := "notify: {webhooks: [{url: 'https://h/a', secret_file: /nonexistent/secret}]}\n" + job("")
	cfg := mustParse(t, y, "yaml", Options{Purpose: ForValidate})
	if len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].String(), "the daemon will refuse to start") {
		t.Errorf("got warnings %v, want one about secret_file", cfg.Warnings)
	}
}

func TestNotify_TOMLandJSON(t *testing.T) {
	toml := "[[notify.webhooks]]\nurl = 'http://h/a'\nevents = ['missed']\n\n[[jobs]]\nname = 'j'\nschedule = '@daily'\ncommand = 'true'\nwarn_after = '1m'\n[[jobs.notify.webhooks]]\nurl = 'http://h/b'\nformat = 'slack'\n"
	cfg := mustParse(t, toml, "toml", Options{})
	if len(cfg.Notify.Webhooks) != 1 || len(cfg.Jobs[0].Notify.Webhooks) != 1 || cfg.Jobs[0].Notify.Webhooks[0].Format != "slack" {
		t.Errorf("toml: got %+v / %+v", cfg.Notify, cfg.Jobs[0].Notify)
	}
	js := `{"notify": {"webhooks": [{"url": "http://h/a"}]}, "jobs": [{"name": "j", "schedule": "@daily", "command": "true", "notify": {"webhooks": [{"url": "http://h/b", "events": ["failing"]}]}}]}`
	cfg = mustParse(t, js, "json", Options{})
	if len(cfg.Notify.Webhooks) != 1 || len(cfg.Jobs[0].Notify.Webhooks) != 1 {
		t.Errorf("json: got %+v / %+v", cfg.Notify, cfg.Jobs[0].Notify)
	}
}
