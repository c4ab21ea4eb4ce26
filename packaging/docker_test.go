package packaging

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerInstr is one instruction of a Dockerfile with its stage index.
type dockerInstr struct {
	stage     int
	cmd, args string
}

// parseDockerfile reads the Dockerfile's instructions (continuation lines
// joined, comments dropped); stage counts FROM lines from 0.
func parseDockerfile(t *testing.T) []dockerInstr {
	t.Helper()
	b, err := os.ReadFile(repoFile("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var out []dockerInstr
	stage := -1
	var cur strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if strings.HasSuffix(trimmed, "\\") {
			cur.WriteString(strings.TrimSuffix(trimmed, "\\") + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		out = append(out, dockerInstr{stage, cmd, strings.TrimSpace(args)})
	}
	return out
}

func TestDockerfile(t *testing.T) {
	instrs := parseDockerfile(t)
	last := instrs[len(instrs)-1].stage
	if last < 1 {
		t.Fatalf("%d stage(s); want a multi-stage build (build, then a minimal runtime)", last+1)
	}
	final := map[string][]string{}
	var buildRun string
	for _, in := range instrs {
		if in.stage == last {
			final[in.cmd] = append(final[in.cmd], in.args)
		}
		if in.stage < last && in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			buildRun = in.args
		}
	}
	if got := final["STOPSIGNAL"]; len(got) != 1 || got[0] != "SIGTERM" {
		t.Errorf("STOPSIGNAL %q; want SIGTERM", got)
	}
	if got := final["USER"]; len(got) != 1 || regexp.MustCompile(`^(0|root)(:|$)`).MatchString(got[0]) {
		t.Errorf("USER %q in the final stage; want one non-root user", got)
	}
	if len(final["RUN"]) != 0 {
		t.Errorf("the final stage runs %q; want only COPY (no shell step on the runtime base)", final["RUN"])
	}
	if buildRun == "" {
		t.Fatal("no RUN … go build … in the build stage")
	}
	var env []string
	for _, in := range instrs {
		if in.stage < last && in.cmd == "ENV" {
			env = append(env, strings.Fields(in.args)...)
		}
	}
	if !slices.Contains(env, "CGO_ENABLED=0") {
		t.Errorf("build stage ENV %q: want CGO_ENABLED=0 (a static binary)", env)
	}
	// The documented docker run needs only the image and a config: no
	// file that only the .deb creates (/etc/default/cronlock), the Redis
	// password from the environment.
	run := documentedDockerRun(t)
	if strings.Contains(run, "/etc/default/") || !strings.Contains(run, "-e CRONLOCK_REDIS_PASSWORD") {
		t.Errorf("the Dockerfile's docker run %q: want -e CRONLOCK_REDIS_PASSWORD and no file of the .deb (/etc/default/cronlock)", run)
	}

	t.Run("image", func(t *testing.T) {
		docker, err := exec.LookPath("docker")
		if err != nil {
			t.Skip("no container engine (docker) installed; the build stage's commands are checked below instead")
		}
		if out, err := exec.Command(docker, "info").CombinedOutput(); err != nil {
			t.Skipf("docker cannot build here (no daemon reachable: %s); the build stage's commands are checked below instead",
				strings.TrimSpace(lastLine(string(out))))
		}
		tag := "cronlock-test:" + filepath.Base(t.TempDir())
		if out, err := exec.Command(docker, "build", "-t", tag, repoFile(".")).CombinedOutput(); err != nil {
			t.Skipf("docker build failed, most likely because the base images cannot be pulled here: %v\n%s", err, lastLine(string(out)))
		}
		defer exec.Command(docker, "rmi", "-f", tag).Run()
		out, err := exec.Command(docker, "run", "--rm", tag, "-validate", "-config", "/etc/cronlock/cronlock.yaml").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "Configuration valid") {
			t.Errorf("docker run %s -validate: %v\n%s", tag, err, out)
		}
	})

	// Without an image: run the build stage's go build (with its ENV, /out
	// → a temporary directory) and check that the binary is static and
	// validates the config the image ships.
	t.Run("build stage", func(t *testing.T) {
		if os.Getenv(debDirEnv) == "" {
			t.Skipf("a -trimpath static build takes minutes from a cold cache; make package-test runs it (%s set) after make package warmed the cache", debDirEnv)
		}
		out := t.TempDir()
		script := strings.ReplaceAll(buildRun, "/out/", out+"/")
		script = strings.ReplaceAll(script, "${VERSION}", "test")
		script = strings.ReplaceAll(script, "${COMMIT}", "")
		if code, log := runCmd(t, repoFile("."), env, nil, "sh", "-c", script); code != 0 {
			t.Fatalf("%s: exit %d\n%s", script, code, log)
		}
		bin := filepath.Join(out, "cronlock")
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("the binary has an ELF interpreter (dynamically linked); the image's base may lack its libc")
			}
		}
		if code, log := runCmd(t, "", []string{"CRONLOCK_NODE_STATE_DIR=" + t.TempDir()}, nil, bin, "-validate", "-config", repoFile("packaging/cronlock.yaml")); code != 0 {
			t.Errorf("-validate the image's config: exit %d\n%s", code, log)
		}
		code, log := runCmd(t, "", nil, nil, bin, "-version", "-json")
		if code != 0 || !strings.Contains(log, `"version":"test"`) {
			t.Errorf("-version -json of a build with VERSION=test: exit %d %s", code, log)
		}
		// As the documented docker run starts it: the user's config with a
		// Redis address, the password in the environment only.
		dir := t.TempDir()
		cfg := filepath.Join(dir, "cronlock.yaml")
		if err := os.WriteFile(cfg, []byte("redis: {address: 'redis.internal:6379'}\njobs:\n- {name: hello, schedule: '@hourly', command: 'echo hello'}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		dockerEnv := []string{"CRONLOCK_NODE_STATE_DIR=" + dir, "ZONEINFO=", "CRONLOCK_NODE_ID=host1", "CRONLOCK_REDIS_PASSWORD=s3cret-pw"}
		code, log = runCmd(t, "", dockerEnv, nil, bin, "-validate", "-config", cfg)
		if code != 0 || !strings.Contains(log, "Redis: redis.internal:6379") || strings.Contains(log, "s3cret-pw") {
			t.Errorf("-validate as the documented docker run: exit %d\n%s", code, log)
		}
	})
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// documentedDockerRun returns the `docker run -d …` command of the
// Dockerfile's header comment, its continuation lines joined.
func documentedDockerRun(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(repoFile("Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var cmd strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		text := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		if cmd.Len() == 0 && !strings.HasPrefix(text, "docker run -d ") {
			continue
		}
		cmd.WriteString(strings.TrimSuffix(text, "\\") + " ")
		if !strings.HasSuffix(text, "\\") {
			break
		}
	}
	if cmd.Len() == 0 {
		t.Fatal("no `docker run -d` example in the Dockerfile's comments")
	}
	return strings.Join(strings.Fields(cmd.String()), " ")
}
