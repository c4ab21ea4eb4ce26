package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestAPIAuth(t *testing.T) {
	dir := t.TempDir()
	good, empty := filepath.Join(dir, "token"), filepath.Join(dir, "empty")
	if err := os.WriteFile(good, []byte("  s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ http, want string }{
		{"{}", ""},
		{"{auth: all, token_file: " + good + "}", ""},
		{"{auth: some}", `http.auth: unknown value "some"; want one of writes, all`},
		{"{auth: all}", `http.auth: "all" needs a token: set http.token_file, or use "writes"`},
		{"{token_file: " + empty + "}", `http.token_file: file "` + empty + `" holds no token`},
		{"{token_file: " + dir + "/none}", `http.token_file: file "` + dir + `/none" does not exist on this host`},
	} {
		got := render(problemsOf(t, "http: "+tt.http+"\n"+job(""), "yaml", Options{Purpose: ForStart}))
		switch {
		case tt.want == "" && len(got) > 0:
			t.Errorf("%s: got %q, want no problem", tt.http, got)
		case tt.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tt.want)):
			t.Errorf("%s: got %q, want one problem %q…", tt.http, got, tt.want)
		}
	}
	if tok, err := ReadToken(good); err != nil || string(tok) != "s3cret" {
		t.Errorf("ReadToken: %q, %v; want s3cret (whitespace trimmed)", tok, err)
	}
}
