package process

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestRedactor_Redact(t *testing.T) {
	env := map[string]string{"DB_PASSWORD": "hunter22", "SHORT": "abc", "TOKEN": "hunter2", "EMPTY": ""}
	pats := []*regexp.Regexp{regexp.MustCompile(`Bearer [A-Za-z0-9]+`), regexp.MustCompile(`\d{4}-\d{4}`)}
	tests := []struct{ in, want string }{
		{"nothing here", "nothing here"},
		{"pw=hunter22;", "pw=[redacted env DB_PASSWORD];"},
		{"pw=hunter2!", "pw=[redacted env TOKEN]!"}, // a value inside a longer one: the longer wins
		{"hunter22hunter22", "[redacted env DB_PASSWORD][redacted env DB_PASSWORD]"},
		{"abc is short", "abc is short"}, // under MinSecret
		{"Authorization: Bearer xyz123 ok", "Authorization: [redacted] ok"},
		{"card 1234-5678 and Bearer q", "card [redacted] and [redacted]"},
		{"", ""},
	}
	r := NewRedactor(env, pats)
	for _, tt := range tests {
		if got := string(r.Redact([]byte(tt.in))); got != tt.want {
			t.Errorf("Redact(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactor_NilWhenNothingToRedact(t *testing.T) {
	r := NewRedactor(map[string]string{"A": "1", "B": "yes"}, nil)
	if r != nil {
		t.Fatalf("got a Redactor for values under MinSecret, want nil")
	}
	in := []byte("a line")
	if got := r.Redact(in); &got[0] != &in[0] {
		t.Errorf("nil Redactor: got a copy, want the input itself")
	}
}

// A secret is never split between two reads: redaction sees whole lines,
// whatever the pieces the pipe delivers.
func TestLineWriter_RedactsAcrossReads(t *testing.T) {
	r := NewRedactor(map[string]string{"KEY": "s3cr3t-value"}, nil)
	for _, chunk := range []int{1, 2, 5, 1 << 20} {
		core, logs := observer.New(zapcore.InfoLevel)
		tail := NewTail(1 << 10)
		var got []string
		w := newLineWriter(zap.New(core), "stdout", 64)
		w.tail, w.redact = tail, r
		w.lines = func(b []byte, partial bool) { got = append(got, string(b)) }
		in := []byte("a s3cr3t-value b\nend s3cr3t-value")
		for len(in) > 0 {
			n := min(chunk, len(in))
			w.Write(in[:n])
			in = in[n:]
		}
		w.Flush()
		want := "a [redacted env KEY] b\nend [redacted env KEY]"
		if string(tail.Bytes()) != want || strings.Join(got, "\n") != want {
			t.Errorf("chunk %d: got tail %q lines %q, want %q", chunk, tail.Bytes(), got, want)
		}
		for _, e := range logs.All() {
			if line := e.ContextMap()["line"].(string); strings.Contains(line, "s3cr3t") {
				t.Errorf("chunk %d: logged %q, want it redacted", chunk, line)
			}
		}
	}
}

// A real run: the log, the tail and Lines see the redacted lines only.
func TestProc_OutputRedacted(t *testing.T) {
	h, spec := newHarness(t)
	r := NewRedactor(map[string]string{"PW": "pa55word"}, []*regexp.Regexp{regexp.MustCompile(`tok-[0-9]+`)})
	spec.Redact = r
	var mu sync.Mutex
	var lines []string
	spec.Lines = func(b []byte, partial bool) { mu.Lock(); lines = append(lines, string(b)); mu.Unlock() }
	spec.Command = `echo "pw pa55word"; echo "tok-123 on stderr" >&2`
	res := h.wait(h.start(spec))
	if tail := string(res.Tail); strings.Contains(tail, "pa55word") || strings.Contains(tail, "tok-123") ||
		!strings.Contains(tail, "pw [redacted env PW]\n") || !strings.Contains(tail, "[redacted] on stderr\n") {
		t.Errorf("got tail %q, want both lines redacted", tail)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 2 || strings.Contains(strings.Join(lines, ""), "pa55") {
		t.Errorf("got lines %q, want the 2 redacted lines", lines)
	}
	if got := h.lines("stdout"); len(got) != 1 || got[0] != "pw [redacted env PW]" {
		t.Errorf("got logged %q, want the redacted line", got)
	}
}

// Each line of a multi-line value is a secret of its own, with the value's
// marker: output is redacted line by line, so the whole value never matches.
func TestRedactor_MultiLineValue(t *testing.T) {
	key := "-----BEGIN KEY-----\r\nQUJDREVGR0g=\nabc\n\n-----END KEY-----\n"
	r := NewRedactor(map[string]string{"KEY": key, "OTHER": "QUJDREVGR0g="}, nil)
	tests := []struct{ in, want string }{
		{"-----BEGIN KEY-----", "[redacted env KEY]"},
		{"-----BEGIN KEY-----\r", "[redacted env KEY]\r"},
		{"k=QUJDREVGR0g=", "k=[redacted env KEY]"}, // shared with OTHER: the first marker
		{"abc", "abc"},              // a line under MinSecret
		{key, "[redacted env KEY]"}, // the whole value (the dashboard's stored tail)
	}
	for _, tt := range tests {
		if got := r.RedactString(tt.in); got != tt.want {
			t.Errorf("Redact(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
	if got, want := r.overlap(), len("-----BEGIN KEY-----")-1; got != want {
		t.Errorf("overlap: got %d, want %d (the longest line, not the whole value)", got, want)
	}
}

// A secret across the cut of an over-long line is never split: at every
// offset and in reads of any size, the joined pieces are the whole line
// redacted, and no piece holds more than max bytes of the line.
func TestLineWriter_RedactsAcrossCut(t *testing.T) {
	const max = 8
	r := NewRedactor(map[string]string{"PW": "SECRET", "AB": "abab"}, []*regexp.Regexp{regexp.MustCompile(`tok-\d+`)})
	var lines []string
	for _, s := range []string{"SECRET", "tok-123", "abababababababababab"} {
		for n := range 2*max + 2 {
			lines = append(lines, strings.Repeat("x", n)+s+strings.Repeat("y", 2*max-n%3))
		}
	}
	for _, line := range lines {
		want := string(r.Redact([]byte(line)))
		for _, chunk := range []int{1, 3, 1 << 20} {
			var pieces []string
			w := newLineWriter(zap.NewNop(), "stdout", max)
			w.redact = r
			w.lines = func(b []byte, partial bool) { pieces = append(pieces, string(b)) }
			for in := []byte(line + "\n"); len(in) > 0; in = in[min(chunk, len(in)):] {
				w.Write(in[:min(chunk, len(in))])
			}
			if got := strings.Join(pieces, ""); got != want {
				t.Errorf("%q in chunks of %d: got pieces %q, want joined %q", line, chunk, pieces, want)
			}
			if got := strings.Join(pieces, ""); strings.Contains(got, "SECRET") || strings.Contains(got, "tok-1") {
				t.Errorf("%q in chunks of %d: got pieces %q, want the secret redacted", line, chunk, pieces)
			}
		}
	}
}

// collect runs spec with the Redactor of env and returns the tail, the
// lines handed to Lines and the logged lines of stdout, each joined with
// "\n" (pieces of a line without it).
func collect(t *testing.T, env map[string]string, command string) (tail, lines, logged string) {
	t.Helper()
	h, spec := newHarness(t)
	for k, v := range env {
		spec.Env = append(spec.Env, k+"="+v)
	}
	spec.Redact, spec.Command, spec.TailSize = NewRedactor(env, nil), command, 1<<20
	var mu sync.Mutex
	var got strings.Builder
	spec.Lines = func(b []byte, partial bool) {
		mu.Lock()
		defer mu.Unlock()
		got.Write(b)
		if !partial {
			got.WriteByte('\n')
		}
	}
	res := h.wait(h.start(spec))
	var log strings.Builder
	for _, l := range h.lines("stdout") {
		if p, ok := strings.CutSuffix(l, "+"); ok {
			log.WriteString(p)
		} else {
			log.WriteString(l + "\n")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	return string(res.Tail), got.String(), log.String()
}

// A real run printing a multi-line env value (a PEM key): no line of it
// reaches the tail, Lines or the log.
func TestProc_MultiLineValueRedacted(t *testing.T) {
	key := "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\r\nBKcwggSjAgEAAoIBAQC7\n-----END PRIVATE KEY-----\n"
	tail, lines, logged := collect(t, map[string]string{"TLS_KEY": key}, `printf 'key: %s' "$TLS_KEY"; echo done`)
	want := "key: [redacted env TLS_KEY]\n[redacted env TLS_KEY]\r\n[redacted env TLS_KEY]\n[redacted env TLS_KEY]\ndone\n"
	for _, s := range []struct{ name, got, want string }{
		{"tail", tail, want}, {"Lines", lines, want}, {"log", logged, strings.ReplaceAll(want, "\r", "")},
	} {
		for line := range strings.SplitSeq(key, "\n") {
			if line = strings.TrimSuffix(line, "\r"); line != "" && strings.Contains(s.got, line) {
				t.Errorf("%s: got %q, holding the key line %q", s.name, s.got, line)
			}
		}
		if s.got != s.want {
			t.Errorf("%s: got %q, want %q", s.name, s.got, s.want)
		}
	}
}

// A real run printing a secret at and around the 16 KiB cut of a long line
// (16,380 "x" then the secret; the secret straddling the cut at every
// offset; at the second cut): the secret reaches neither the tail, nor
// Lines, nor the log, and each line arrives whole but for the marker.
func TestProc_SecretAcrossCutRedacted(t *testing.T) {
	const pw = "s3cr3t-0123456789abcdef"
	var offsets []int
	for n := DefaultMaxLine - len(pw); n <= DefaultMaxLine; n++ {
		offsets = append(offsets, n)
	}
	offsets = append(offsets, 16380, 2*DefaultMaxLine-5)
	var cmd, want strings.Builder
	for _, n := range offsets {
		fmt.Fprintf(&cmd, `head -c %d /dev/zero | tr '\0' x; printf '%%s' "$PW"; head -c 20000 /dev/zero | tr '\0' y; echo; `, n)
		want.WriteString(strings.Repeat("x", n) + "[redacted env PW]" + strings.Repeat("y", 20000) + "\n")
	}
	tail, lines, logged := collect(t, map[string]string{"PW": pw}, cmd.String())
	for name, got := range map[string]string{"tail": tail, "Lines": lines, "log": logged} {
		if strings.Contains(got, pw[:12]) || strings.Contains(got, pw[11:]) {
			t.Errorf("%s: holds (part of) the secret", name)
		}
		if got != want.String() {
			t.Errorf("%s: got %d bytes, want the %d lines redacted (%d bytes)", name, len(got), len(offsets), want.Len())
		}
	}
}
