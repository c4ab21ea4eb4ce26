package api

import (
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
)

// SocketName returns the control socket's address of the memory-backend
// daemon started with the config file at path: an abstract Unix socket
// (Linux; "@" is Go's spelling of the leading NUL byte), so there is no
// file to clean up, no path length limit and no dependence on
// node.state_dir, whose value may come from the daemon's environment
// (make run sets CRONLOCK_NODE_STATE_DIR) where the operator's shell does
// not have it. It is named after the file's absolute path with symbolic
// links resolved, so the cronlock command given the same file finds the
// daemon whatever its working directory. Only the daemon's own user and
// root may use it (package engine checks each peer's credentials).
func SocketName(path string) string {
	p, err := filepath.Abs(path)
	if err != nil {
		p = filepath.Clean(path)
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	sum := sha256.Sum256([]byte("cronlock control socket\x00" + p))
	return "@cronlock/" + hex.EncodeToString(sum[:12])
}
