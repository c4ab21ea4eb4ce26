package process

import (
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
		w.tail, w.redact = tail, r.Redact
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
	spec.Redact = r.Redact
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
