package config

import "strings"

// node.state_dir's default (the directory itself is package statedir's).

// DefaultStateDir is node.state_dir's default outside systemd.
const DefaultStateDir = "/var/lib/cronlock"

// stateDirOf returns the state directory to use: configured when not empty;
// else the first entry of $STATE_DIRECTORY (set by systemd's
// StateDirectory=, see systemd.exec(5)); else DefaultStateDir.
func stateDirOf(configured string, environ []string) string {
	if configured != "" {
		return configured
	}
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, "STATE_DIRECTORY="); ok && v != "" {
			first, _, _ := strings.Cut(v, ":")
			return first
		}
	}
	return DefaultStateDir
}
