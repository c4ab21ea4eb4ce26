// Package statedir is the node's local state: the state directory
// (node.state_dir) and the small files a daemon keeps across its own
// restarts — the memory backend's claimed slots and fences, the persisted
// node id, and the run records (runrecords.go: the process groups and lease
// values of runs in progress). It offers an exclusive lock (one daemon per
// directory) and crash-safe whole-file writes.
package statedir

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// lockName is the file held with flock(2) LOCK_EX while a daemon uses the
// directory; it holds that daemon's pid, for the error message.
const lockName = "lock"

// Dir is an open state directory, held exclusively by this process until
// Close. Its methods are safe for concurrent use (each call is one file
// operation; writers of one name must not race each other).
type Dir struct {
	path string
	lock *os.File
}

// Open creates path (mode 0700, with parents) if needed, checks that it is
// writable, and takes its exclusive lock. It fails with an error naming the
// directory and the fix when the directory cannot be created or written, or
// when another process holds it (two daemons sharing one state directory
// would kill each other's leftover runs at start). It never blocks.
func Open(path string) (*Dir, error) {
	if !filepath.IsAbs(path) {
		return nil, fmt.Errorf("state directory %q: not an absolute path; set node.state_dir to one", path)
	}
	if err := os.MkdirAll(path, 0o700); err != nil {
		return nil, fmt.Errorf("state directory %s: %w; create it writable for the daemon's user or set node.state_dir", path, err)
	}
	f, err := os.OpenFile(filepath.Join(path, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state directory %s not writable: %w; make it writable for the daemon's user or set node.state_dir", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder, _ := os.ReadFile(f.Name())
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("state directory %s is in use by another cronlock process (pid %s); "+
				"give each daemon on this machine its own node.state_dir", path, strings.TrimSpace(string(holder)))
		}
		return nil, fmt.Errorf("state directory %s: lock: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, err = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("state directory %s not writable: %w", path, err)
		}
	}
	return &Dir{path: path, lock: f}, nil
}

// Path returns the directory's absolute path.
func (d *Dir) Path() string { return d.path }

// Close releases the directory's lock. The files stay.
func (d *Dir) Close() error { return d.lock.Close() }

// ReadFile returns the content of name; a missing file is an error
// satisfying errors.Is(err, fs.ErrNotExist).
func (d *Dir) ReadFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(d.path, name))
}

// WriteFile replaces name with data atomically and durably: it writes a
// temporary file in the directory, fsyncs it, renames it over name and
// fsyncs the directory, so that after a crash or power loss name holds
// either the old or the new content, never a mix (rename(2) semantics).
// Mode is 0600. It blocks for the fsyncs (milliseconds on most disks).
func (d *Dir) WriteFile(name string, data []byte) error {
	tmp, err := os.CreateTemp(d.path, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("state file %s: %w", name, err)
	}
	_, err = tmp.Write(data)
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(d.path, name))
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return fmt.Errorf("state file %s: %w", name, err)
	}
	if err := syncDir(d.path); err != nil {
		return fmt.Errorf("state file %s: sync directory: %w", name, err)
	}
	return nil
}

// Remove deletes name; a missing file is not an error.
func (d *Dir) Remove(name string) error {
	if err := os.Remove(filepath.Join(d.path, name)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("state file %s: %w", name, err)
	}
	return nil
}

func syncDir(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
