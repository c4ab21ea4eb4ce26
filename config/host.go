package config

import (
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
)

// hostChecks looks up work_dir, shell and user on this host, once per
// distinct value per load. Each result is "" (fine) or the problem.
type hostChecks struct {
	path  string // PATH of Options.Environ, for a shell without a slash
	cache map[string]string
}

func newHostChecks(path string) *hostChecks {
	return &hostChecks{path: path, cache: map[string]string{}}
}

func (h *hostChecks) cached(kind, val string, f func(string) string) string {
	k := kind + "\x00" + val
	msg, ok := h.cache[k]
	if !ok {
		msg = f(val)
		h.cache[k] = msg
	}
	return msg
}

// workDir reports a directory that does not exist or is not a directory.
func (h *hostChecks) workDir(dir string) string {
	return h.cached("dir", dir, func(dir string) string {
		fi, err := os.Stat(dir)
		switch {
		case err != nil:
			return fmt.Sprintf("directory %q does not exist on this host", dir)
		case !fi.IsDir():
			return fmt.Sprintf("%q is not a directory", dir)
		}
		return ""
	})
}

// shell reports a shell that is not an executable file; a name without a
// slash is searched in PATH as exec.LookPath does.
func (h *hostChecks) shell(sh string) string {
	return h.cached("shell", sh, func(sh string) string {
		if strings.Contains(sh, "/") {
			return executable(sh)
		}
		for _, dir := range filepath.SplitList(h.path) {
			if dir == "" {
				dir = "."
			}
			if executable(filepath.Join(dir, sh)) == "" {
				return ""
			}
		}
		return fmt.Sprintf("%q is not found in PATH (%q); give its absolute path, e.g. /bin/bash", sh, h.path)
	})
}

// executable reports a path that is not an executable regular file.
func executable(path string) string {
	fi, err := os.Stat(path)
	switch {
	case err != nil:
		return fmt.Sprintf("shell %q does not exist on this host", path)
	case fi.IsDir() || fi.Mode()&0o111 == 0:
		return fmt.Sprintf("shell %q is not an executable file", path)
	}
	return ""
}

// user reports a user name (or numeric id) unknown to this host, resolved
// as process does.
func (h *hostChecks) user(name string) string {
	return h.cached("user", name, func(name string) string {
		_, err := user.Lookup(name)
		var unknown user.UnknownUserError
		if err != nil && errors.As(err, &unknown) {
			if _, perr := strconv.Atoi(name); perr == nil {
				_, err = user.LookupId(name)
			}
		}
		if err != nil {
			return fmt.Sprintf("unknown user %q on this host", name)
		}
		return ""
	})
}
