package config

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	testMachineID = "0123456789abcdef0123456789abcdef"
	oneJob        = "jobs:\n- {name: a, schedule: '@hourly', command: 'true'}\n"
)

// nodeOf parses a config with node.state_dir dir and returns its node.
func nodeOf(t *testing.T, dir, machineID string, extra ...string) Node {
	t.Helper()
	env := append([]string{"CRONLOCK_NODE_STATE_DIR=" + dir}, extra...)
	return mustParse(t, oneJob, "yaml", Options{Hostname: "web1", MachineID: machineID, Environ: env, Purpose: ForStart}).Node
}

// The default id from /etc/machine-id is stable: the same machine id and
// state directory always give the same id (a fixed value: changing the
// derivation would rename every node on upgrade); another state
// directory or machine gives another id; the machine id does not show.
func TestNodeID_FromMachineID(t *testing.T) {
	n := nodeOf(t, "/var/lib/cronlock", testMachineID+"\n")
	if n.ID != "web1-0e8ffaa3" || n.IDSource != IDMachine {
		t.Fatalf("got %q (%s), want web1-0e8ffaa3 (machine-id)", n.ID, n.IDSource)
	}
	if again := nodeOf(t, "/var/lib/cronlock", testMachineID); again.ID != n.ID {
		t.Errorf("second load: got %q, want %q", again.ID, n.ID)
	}
	if other := nodeOf(t, "/srv/cronlock-b", testMachineID); other.ID == n.ID {
		t.Errorf("other state dir: got the same id %q", other.ID)
	}
	if other := nodeOf(t, "/var/lib/cronlock", strings.Repeat("0", 32)); other.ID == n.ID {
		t.Errorf("other machine: got the same id %q", other.ID)
	}
	if strings.Contains(n.ID, testMachineID[:8]) {
		t.Errorf("id %q shows the machine id", n.ID)
	}
	if n.IDOrigin() != "default: hostname + hash of /etc/machine-id and node.state_dir" {
		t.Errorf("origin: %q", n.IDOrigin())
	}
}

// The default id does not depend on how node.state_dir is spelled: a
// trailing slash, a "." component and a symbolic link to the directory
// give the id of its canonical path; a directory that does not exist is
// only cleaned.
func TestNodeID_StateDirSpellings(t *testing.T) {
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "mem1")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	want := nodeOf(t, dir, testMachineID).ID
	for _, spelling := range []string{dir + "/", filepath.Join(base, ".") + "/./mem1", link, link + "/", base + "/x/../mem1"} {
		if got := nodeOf(t, spelling, testMachineID); got.ID != want || got.IDSource != IDMachine {
			t.Errorf("state dir %q: got %q (%s), want %q as for %q", spelling, got.ID, got.IDSource, want, dir)
		}
	}
	if other := nodeOf(t, base, testMachineID).ID; other == want {
		t.Errorf("parent directory: got the same id %q", other)
	}
	// Not there (e.g. -validate on another machine): cleaned only.
	if got, want := nodeOf(t, "/nonexistent/./cronlock/", testMachineID).ID, nodeOf(t, "/nonexistent/cronlock", testMachineID).ID; got != want {
		t.Errorf("missing dir: got %q, want %q", got, want)
	}
	if got := nodeOf(t, "/var/lib/cronlock/", testMachineID).ID; got != "web1-0e8ffaa3" {
		t.Errorf("/var/lib/cronlock/: got %q, want web1-0e8ffaa3", got)
	}
}

// A configured node.id always wins, and its origin names what set it:
// the environment variable, or node.id in the file (issue 33: the start-up
// line said "set by node.id" for an id from CRONLOCK_NODE_ID).
func TestNodeID_ConfiguredWins(t *testing.T) {
	n := nodeOf(t, "/var/lib/cronlock", testMachineID, "CRONLOCK_NODE_ID=db-primary")
	if n.ID != "db-primary" || n.IDSource != IDConfigured ||
		n.IDOrigin() != "set by the environment variable CRONLOCK_NODE_ID" {
		t.Errorf("got %q (%s, %q), want db-primary, configured by CRONLOCK_NODE_ID", n.ID, n.IDSource, n.IDOrigin())
	}
	env := []string{"CRONLOCK_NODE_STATE_DIR=/var/lib/cronlock"}
	for _, c := range []struct {
		env  []string
		want string
	}{
		{env, "set by node.id in the config file"},
		{append(env, "CRONLOCK_NODE_ID=from-env"), "set by the environment variable CRONLOCK_NODE_ID"},
	} {
		f := mustParse(t, "node: {id: from-file}\n"+oneJob, "yaml", Options{Hostname: "web1", MachineID: testMachineID, Environ: c.env, Purpose: ForStart}).Node
		if f.IDOrigin() != c.want {
			t.Errorf("env %v: origin %q, want %q", c.env, f.IDOrigin(), c.want)
		}
	}
}

// Without a machine id (containers) the daemon makes an id once and keeps
// it in the state directory; every later load reads it back.
func TestNodeID_KeptInStateDir(t *testing.T) {
	for _, mid := range []string{"", "uninitialized\n", strings.ToUpper(testMachineID), "abc"} {
		dir := t.TempDir()
		first := nodeOf(t, dir, mid)
		if !regexp.MustCompile(`^web1-[0-9a-f]{8}$`).MatchString(first.ID) || first.IDSource != IDNew {
			t.Fatalf("machine id %q, no node-id file: got %q (%s), want web1-<8 hex> (new)", mid, first.ID, first.IDSource)
		}
		if !strings.Contains(first.IDOrigin(), filepath.Join(dir, NodeIDFile)) {
			t.Errorf("origin %q does not name the file", first.IDOrigin())
		}
		if err := KeepNodeID(&first, func(name string, data []byte) error {
			return os.WriteFile(filepath.Join(dir, name), data, 0o600)
		}); err != nil || first.IDSource != IDStateDir {
			t.Fatalf("KeepNodeID: %v, source %s", err, first.IDSource)
		}
		for range 2 {
			if n := nodeOf(t, dir, mid); n.ID != first.ID || n.IDSource != IDStateDir {
				t.Errorf("machine id %q, after KeepNodeID: got %q (%s), want %q (state-dir)", mid, n.ID, n.IDSource, first.ID)
			}
		}
	}
}

// KeepNodeID writes nothing for an id that needs no keeping, and returns
// the write's error.
func TestKeepNodeID(t *testing.T) {
	n := Node{ID: "x", IDSource: IDMachine}
	if err := KeepNodeID(&n, func(string, []byte) error { t.Fatal("write called"); return nil }); err != nil {
		t.Fatal(err)
	}
	n = Node{ID: "x", IDSource: IDNew}
	boom := errors.New("disk full")
	if err := KeepNodeID(&n, func(string, []byte) error { return boom }); !errors.Is(err, boom) || n.IDSource != IDNew {
		t.Errorf("got %v, source %s; want the write error, still new", err, n.IDSource)
	}
}

// A node-id file that holds no valid id stops the daemon with an error
// naming the file and the fix; for -validate it is a warning.
func TestNodeID_BadFile(t *testing.T) {
	for _, content := range []string{"", "two words\n", "id\nsecond line\n", strings.Repeat("x", 300)} {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, NodeIDFile), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		env := []string{"CRONLOCK_NODE_STATE_DIR=" + dir}
		_, err := Parse([]byte(oneJob), "yaml", Options{Hostname: "web1", Environ: env, Purpose: ForStart})
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), "node.state_dir") ||
			!strings.Contains(err.Error(), filepath.Join(dir, NodeIDFile)) || !strings.Contains(err.Error(), "set node.id") {
			t.Errorf("content %q, ForStart: got %v, want a node.state_dir problem naming the file and the fix", content, err)
		}
		cfg, err := Parse([]byte(oneJob), "yaml", Options{Hostname: "web1", Environ: env, Purpose: ForValidate})
		if err != nil || len(cfg.Warnings) != 1 || !strings.Contains(cfg.Warnings[0].Msg, NodeIDFile) {
			t.Errorf("content %q, ForValidate: got %v, warnings %v; want one warning", content, err, cfg.Warnings)
		}
	}
}
