package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
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

// hostProblem reports msg (a host lookup's finding, "" = none) as a warning
// at -validate and as an error at start: the file, directory or user may
// exist only on the host the daemon runs on, but the daemon must not start
// and then fail.
func hostProblem(p *problems, purpose Purpose, path, msg string) {
	switch {
	case msg == "":
	case purpose == ForStart:
		p.err(path, "%s", msg)
	default:
		p.warn(path, msg+"; the daemon will refuse to start")
	}
}

// checkTLSFiles checks the TLS files as the daemon loads them at start
// (engine.RedisOptions): ca_file must hold a PEM certificate, cert_file and
// key_file must form a key pair. They are used only with lock.backend
// redis and redis.tls.enabled; files given without enabled are a warning,
// as they would be ignored.
func checkTLSFiles(backend string, t TLS, p *problems, purpose Purpose, path func(string) string) {
	files := map[string]string{"redis.tls.ca_file": t.CAFile, "redis.tls.cert_file": t.CertFile, "redis.tls.key_file": t.KeyFile}
	if !t.Enabled {
		for _, k := range sortedKeys(files) {
			if files[k] != "" {
				p.warn(path(k), fmt.Sprintf("%q is given but redis.tls.enabled is false, so TLS is off and the file is not used; "+
					"set redis.tls.enabled: true or remove it", files[k]))
			}
		}
		return
	}
	if backend != "redis" {
		return
	}
	if t.InsecureSkipVerify {
		p.warn(path("redis.tls.insecure_skip_verify"), "true: the Redis server's certificate is not verified, so anyone on "+
			"the network path can pose as Redis and hand out claims; give its CA in redis.tls.ca_file instead (for tests only)")
	}
	if t.CAFile != "" {
		hostProblem(p, purpose, path("redis.tls.ca_file"), caFileProblem(t.CAFile))
	}
	if t.CertFile == "" || t.KeyFile == "" {
		return // one without the other is reported by checkRedis
	}
	certMsg, keyMsg := readProblem(t.CertFile), readProblem(t.KeyFile)
	hostProblem(p, purpose, path("redis.tls.cert_file"), certMsg)
	hostProblem(p, purpose, path("redis.tls.key_file"), keyMsg)
	if certMsg == "" && keyMsg == "" {
		if _, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile); err != nil {
			hostProblem(p, purpose, "redis.tls", fmt.Sprintf("cert_file %q and key_file %q are not a usable key pair: %v", t.CertFile, t.KeyFile, err))
		}
	}
}

// readProblem reports a file that cannot be read.
func readProblem(file string) string {
	_, err := os.ReadFile(file)
	return fileError(file, err)
}

// fileError words a failed read of file ("" for a nil err).
func fileError(file string, err error) string {
	var pe *fs.PathError
	switch {
	case err == nil:
		return ""
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Sprintf("file %q does not exist on this host", file)
	case errors.As(err, &pe):
		return fmt.Sprintf("cannot read %q: %v", file, pe.Err)
	}
	return fmt.Sprintf("cannot read %q: %v", file, err)
}

// caFileProblem reports a CA file that cannot be read or holds no PEM
// certificate.
func caFileProblem(file string) string {
	pem, err := os.ReadFile(file)
	if err != nil {
		return fileError(file, err)
	}
	if !x509.NewCertPool().AppendCertsFromPEM(pem) {
		return fmt.Sprintf("%q holds no PEM certificate", file)
	}
	return ""
}
