package engine

import (
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A reload re-reads http.token_file: a rotated token replaces the one the
// API accepts (logged at info, the token never); a file that became
// unreadable or empty keeps the old one with an error line.
func TestReloadToken_Rotates(t *testing.T) {
	file := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(file, []byte("old-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	var cur atomic.Pointer[[]byte]
	old := []byte("old-secret")
	cur.Store(&old)
	reloadToken(zap.New(core), &cur, file)
	if got := string(*cur.Load()); got != "old-secret" || logs.Len() != 0 {
		t.Errorf("unchanged file: got token %q and %d log lines, want the old token and none", got, logs.Len())
	}
	if err := os.WriteFile(file, []byte("new-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	reloadToken(zap.New(core), &cur, file)
	if got := string(*cur.Load()); got != "new-secret" {
		t.Errorf("rotated file: got token %q, want new-secret", got)
	}
	if n := logs.FilterMessageSnippet("API token rotated").FilterLevelExact(zapcore.InfoLevel).Len(); n != 1 {
		t.Errorf("rotation lines: got %d, want 1", n)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	reloadToken(zap.New(core), &cur, file)
	if got := string(*cur.Load()); got != "new-secret" {
		t.Errorf("emptied file: got token %q, want new-secret kept", got)
	}
	if n := logs.FilterLevelExact(zapcore.ErrorLevel).Len(); n != 1 {
		t.Errorf("error lines for the emptied file: got %d, want 1", n)
	}
	for _, e := range logs.All() {
		for _, f := range e.Context {
			if f.String == "new-secret" || f.String == "old-secret" {
				t.Errorf("log line %q holds the token", e.Message)
			}
		}
	}
}
