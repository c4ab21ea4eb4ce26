package main

import (
	"errors"
	"fmt"
	"github.com/cronlock/cronlock/ledger/memory"
	"io/fs"
	"os"
	"syscall"

	"github.com/cronlock/cronlock/config"
	"github.com/cronlock/cronlock/engine"
	"github.com/cronlock/cronlock/statedir"
)

// openManualMemory returns the memory backend of `cronlock run`. When no
// daemon holds the node's state directory and it belongs to this user, the
// run uses the daemon's state file (memory.OpenMemory, with the pause
// records applied: engine.ApplyMemoryPauses): its fencing
// token continues the daemon's and the daemon's next start continues
// after it. Otherwise (a daemon is running, and its state lives in its
// process; the directory does not exist yet or belongs to another user)
// the backend is a fresh one in this process, and note says what that
// means. It never creates the directory: one made by an operator's
// command could be unusable for the daemon's user. A state file that
// cannot be used is an error. The caller closes dir when not nil.
func openManualMemory(cfg *config.Config) (m *memory.Memory, dir *statedir.Dir, note string, err error) {
	path := cfg.Node.StateDir
	local := "memory backend: this run's lease and fencing token are local to this process"
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return memory.NewMemory(), nil, local + " (no state directory " + path + " yet: the token is not kept)", nil
	case err != nil:
		return memory.NewMemory(), nil, fmt.Sprintf("%s (state directory: %v)", local, err), nil
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return memory.NewMemory(), nil, fmt.Sprintf("%s (state directory %s belongs to uid %d: run as that user "+
			"to continue the daemon's fencing tokens)", local, path, st.Uid), nil
	}
	dir, err = statedir.Open(path)
	if err != nil {
		return memory.NewMemory(), nil, fmt.Sprintf("%s; a running daemon is not consulted, and the token may "+
			"repeat one of the daemon's (%v)", local, err), nil
	}
	if m, err = memory.OpenMemory(dir); err == nil {
		err = engine.ApplyMemoryPauses(m, dir)
	}
	if err != nil {
		dir.Close()
		return nil, nil, "", err
	}
	return m, dir, "", nil
}
