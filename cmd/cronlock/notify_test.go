package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cronlock/cronlock/notify"
)

func TestNotifyTest_ReportsEachWebhook(t *testing.T) {
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("k3y"), 0o600); err != nil {
		t.Fatal(err)
	}
	verified := make(chan bool, 1)
	ok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		verified <- notify.Verify([]byte("k3y"), r.Header.Get(notify.HeaderTimestamp), body, r.Header.Get(notify.HeaderSignature))
	}))
	defer ok.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }))
	defer down.Close()
	cfg := filepath.Join(dir, "c.yaml")
	y := "notify: {webhooks: [{url: '" + ok.URL + "/a?token=t0k3n', secret_file: " + secret + "}]}\n" +
		"jobs:\n- name: j\n  schedule: '@daily'\n  command: 'true'\n  notify: {webhooks: [{url: '" + down.URL + "/b', events: [failing]}]}\n"
	if err := os.WriteFile(cfg, []byte(y), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, nil, "notify", "test", "-config", cfg, "-job", "j")
	if code != 1 || !strings.Contains(out, "ok    "+ok.URL+"/a: failing sent (json, signed)") ||
		!strings.Contains(out, "FAIL  "+down.URL+"/b: the receiver answered 503") || strings.Contains(out, "t0k3n") {
		t.Errorf("got exit %d, stdout:\n%s\nstderr:\n%s\nwant exit 1, one ok line (the URL without its query), one FAIL line", code, out, errOut)
	}
	if !<-verified {
		t.Errorf("the sample's signature does not verify")
	}
	code, out, _ = runCLI(t, nil, "notify", "test", "-config", cfg, "-event", "missed")
	if code != 0 || !strings.Contains(out, "skip  "+down.URL+"/b: does not receive missed") {
		t.Errorf("-event missed: got exit %d, stdout:\n%s\nwant exit 0 and the job's webhook skipped", code, out)
	}
	<-verified
	if code, _, _ := runCLI(t, nil, "notify", "send", "-config", cfg); code != 2 {
		t.Errorf("notify send: got exit %d, want 2", code)
	}
}
