package statedir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestOpenLocksExclusively(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("stat %s: %v, mode %v; want 0700", dir, err, fi.Mode().Perm())
	}
	// flock locks belong to the open file description: a second Open in
	// the same process conflicts exactly as another process would.
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "in use by another cronlock process") {
		t.Fatalf("second Open: %v, want in-use error", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := Open(dir)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	d2.Close()
}

func TestOpenErrors(t *testing.T) {
	if _, err := Open("relative/dir"); err == nil || !strings.Contains(err.Error(), "node.state_dir") {
		t.Errorf("relative: %v", err)
	}
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(filepath.Join(file, "sub")); err == nil || !strings.Contains(err.Error(), "node.state_dir") {
		t.Errorf("under a file: %v", err)
	}
}

func TestWriteFileReplaces(t *testing.T) {
	d, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.ReadFile("x"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	for _, s := range []string{"one", "two"} {
		if err := d.WriteFile("x", []byte(s)); err != nil {
			t.Fatal(err)
		}
		got, err := d.ReadFile("x")
		if err != nil || string(got) != s {
			t.Fatalf("ReadFile = %q, %v; want %q", got, err, s)
		}
	}
	ents, _ := os.ReadDir(d.Path())
	for _, e := range ents {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
	if err := d.Remove("x"); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove("x"); err != nil {
		t.Fatalf("second Remove: %v", err)
	}
}
