// Package packaging holds the tests of the files in packaging/, docs/man/
// and the Dockerfile: the systemd unit, the starter config, install.sh,
// the maintainer scripts, the man pages and, under `make package-test`
// (CRONLOCK_DEB_DIR set), the .deb files that `make package` built.
package packaging

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

// repoFile is the path of a file relative to the repository root (tests
// run in packaging/).
func repoFile(name string) string { return filepath.Join("..", name) }

// built is what buildOnce produces: a cronlock binary, man pages,
// completion scripts and a stand-in THIRD_PARTY_LICENSES in the layout
// install.sh --from expects (DIR/cronlock, DIR/man/*.gz, DIR/completion/*,
// DIR/THIRD_PARTY_LICENSES).
var built struct {
	once sync.Once
	dir  string
	err  error
}

// buildDir builds cronlock (the same `go build` as e2e/main_test.go, so the
// cache is shared), the man pages (go-md2man from tools/go.mod) and the
// completion scripts once per test binary, and returns their directory.
func buildDir(t *testing.T) string {
	t.Helper()
	built.once.Do(func() {
		dir, err := os.MkdirTemp("", "cronlock-pkg-")
		if err != nil {
			built.err = err
			return
		}
		built.dir = dir
		built.err = buildAll(dir)
	})
	if built.err != nil {
		t.Fatalf("build: %v", built.err)
	}
	return built.dir
}

// buildAll fills dir; see buildDir.
func buildAll(dir string) error {
	bin := filepath.Join(dir, "cronlock")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/cronlock/cronlock/cmd/cronlock").CombinedOutput(); err != nil {
		return errors.New("go build: " + err.Error() + "\n" + string(out))
	}
	md2man, err := exec.Command("go", "-C", repoFile("tools"), "tool", "-n", "go-md2man").Output()
	if err != nil {
		return errors.New("go tool -n go-md2man (tools/go.mod): " + err.Error())
	}
	for _, page := range []string{"cronlock.1", "cronlock.yaml.5"} {
		out := filepath.Join(dir, "man", page)
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			return err
		}
		cmd := exec.Command(strings.TrimSpace(string(md2man)), "-in", repoFile("docs/man/"+page+".md"), "-out", out)
		if b, err := cmd.CombinedOutput(); err != nil {
			return errors.New("go-md2man " + page + ": " + err.Error() + "\n" + string(b))
		}
		if err := gzipFile(out); err != nil {
			return err
		}
	}
	// A stand-in: the real file (scripts/third-party-licenses.sh, which
	// loads every package with go-licenses) is tested under make
	// package-test; install.sh --from only copies it.
	if err := os.WriteFile(filepath.Join(dir, "THIRD_PARTY_LICENSES"), []byte("stand-in of the packaging tests\n"), 0o644); err != nil {
		return err
	}
	for shell, name := range map[string]string{"bash": "cronlock.bash", "zsh": "_cronlock"} {
		out, err := exec.Command(bin, "completion", shell).Output()
		if err != nil {
			return errors.New("cronlock completion " + shell + ": " + err.Error())
		}
		if err := os.MkdirAll(filepath.Join(dir, "completion"), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, "completion", name), out, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// gzipFile replaces path with path.gz.
func gzipFile(path string) error {
	in, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if _, err := zw.Write(in); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if err := os.WriteFile(path+".gz", buf.Bytes(), 0o644); err != nil {
		return err
	}
	return os.Remove(path)
}

// unitKeys parses a systemd unit file into "Section.Key" → values (a key
// may repeat). Comments and blank lines are skipped.
func unitKeys(t *testing.T, path string) map[string][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	keys := map[string][]string{}
	section := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: %q is not KEY=VALUE inside a section", path, n, line)
			}
			keys[section+"."+k] = append(keys[section+"."+k], v)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return keys
}

// packageFiles returns the destinations of packaging/nfpm.yaml's contents:
// the files of the .deb.
func packageFiles(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(repoFile("packaging/nfpm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	for _, m := range regexp.MustCompile(`(?m)^    dst: (\S+)$`).FindAllStringSubmatch(string(b), -1) {
		files = append(files, m[1])
	}
	if len(files) < 10 {
		t.Fatalf("nfpm.yaml lists %d files; the parser expects `    dst: PATH` lines", len(files))
	}
	return files
}

// lookTool returns the path of tool or skips the test naming the Debian
// package that provides it and what installs it.
func lookTool(t *testing.T, tool, debPackage string) string {
	t.Helper()
	p, err := exec.LookPath(tool)
	if err != nil {
		t.Skipf("%s not installed (Debian package %s; .ci/run installs it)", tool, debPackage)
	}
	return p
}

// runCmd runs name with args (dir "" = the test's directory, env added to
// the process environment) and returns its exit code and combined output.
func runCmd(t *testing.T, dir string, env []string, stdin io.Reader, name string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = stdin
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	} else if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return 0, string(out)
}
