package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// nest returns n levels of open, then inner, then n levels of close.
func nest(open, inner, close string, n int) string {
	return strings.Repeat(open, n) + inner + strings.Repeat(close, n)
}

// yamlBlock returns a YAML block mapping nested levels deep by indentation
// (the top-level mapping is level 1).
func yamlBlock(levels int) string {
	var b strings.Builder
	for i := range levels - 1 {
		fmt.Fprintf(&b, "%sk%d:\n", strings.Repeat(" ", i), i)
	}
	fmt.Fprintf(&b, "%sleaf: 1\n", strings.Repeat(" ", levels-1))
	return b.String()
}

// tomlHeader returns a TOML file whose table header has segs segments.
func tomlHeader(segs int) string {
	return "[" + strings.TrimSuffix(strings.Repeat("a.", segs), ".") + "]\nx = 1\n"
}

// TestLimits_Depth: 64 levels decode in every format and syntax, 65 give
// one problem naming the limit and the line; brackets in strings and
// comments do not count.
func TestLimits_Depth(t *testing.T) {
	deep := func(line int) string { return fmt.Sprintf("nesting deeper than 64 levels at line %d;", line) }
	aliases := "a: &a " + nest("[", "1", "]", 40) + "\nb: " + nest("[", "*a", "]", 23) + "\n"
	tests := []struct {
		name, format, data string
		want               string // "" = no depth problem
	}{
		{"yaml flow 64", "yaml", "a: " + nest("[", "1", "]", 63), ""},
		{"yaml flow 65", "yaml", "x: 1\na: " + nest("[", "1", "]", 64), deep(2)},
		{"yaml block 64", "yaml", yamlBlock(64), ""},
		{"yaml block 65", "yaml", yamlBlock(65), deep(65)},
		{"yaml alias within", "yaml", aliases, ""}, // 1 + 23 + 40 = 64
		{"yaml alias beyond", "yaml", aliases + "c: [" + nest("[", "*a", "]", 23) + "]\n", deep(3)},
		{"yaml alias fan-out", "yaml", fanOut(12), ""},                                                  // 12 levels, 10^12 leaves when expanded
		{"yaml block scalar", "yaml", "a: |\n  " + strings.ReplaceAll(yamlBlock(70), "\n", "\n  "), ""}, // indentation inside a string
		{"json 64", "json", nest("{\"a\": ", "1", "}", 64), ""},
		{"json 65", "json", "{\"a\":\n" + nest("[", "1", "]", 64) + "}", deep(2)},
		{"json brackets in strings", "json", `{"a": "` + strings.Repeat("[{", 100) + `"}`, ""},
		{"toml array 64", "toml", "a = " + nest("[", "1", "]", 63), ""},
		{"toml array 65", "toml", "x = 1\na = " + nest("[", "1", "]", 64), deep(2)},
		{"toml inline table 65", "toml", "a = " + nest("{b = ", "1", "}", 64), deep(1)},
		{"toml dotted key 64", "toml", strings.Repeat("a.", 63) + "a = 1\n", ""},
		{"toml dotted key 65", "toml", "\n" + strings.Repeat("a.", 64) + "a = 1\n", deep(2)},
		{"toml header 64", "toml", tomlHeader(63), ""},
		{"toml header 65", "toml", tomlHeader(64), deep(1)},
		{"toml array table", "toml", "[[" + strings.TrimSuffix(strings.Repeat("a.", 63), ".") + "]]\n", deep(1)},
		{"toml dotted key in inline table", "toml", "a = {" + strings.Repeat("b.", 63) + "c = 1}\n", deep(1)},
		{"toml inline table keys reset", "toml", "a = {" + strings.Repeat("b.", 30) + "c = 1, " + strings.Repeat("d.", 30) + "e = 1}\n", ""},
		{"toml strings", "toml", "a = \"" + strings.Repeat("[", 100) + "\"\nb = '" + strings.Repeat("{", 100) +
			"'\nc = \"\"\"\n" + strings.Repeat("[", 100) + "\\\"\"\"\"\nd = '''" + strings.Repeat("[", 100) + "''''\n", ""},
		{"toml comment", "toml", "# " + strings.Repeat("[", 100) + "\na = 1 # " + strings.Repeat("{", 100) + "\n", ""},
		{"toml line after multi-line string", "toml", "c = \"\"\"\n\n\n\"\"\"\na = " + nest("[", "1", "]", 64), deep(5)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			_, err := Parse([]byte(tt.data), tt.format, Options{})
			var ve *ValidationError
			if errors.As(err, &ve) {
				got = render(ve.Problems)
			}
			depth := slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "nesting deeper") })
			switch {
			case tt.want == "" && depth:
				t.Errorf("got a depth problem %q, want none", got)
			case tt.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tt.want)):
				t.Errorf("got %q, want the one problem %q…", got, tt.want)
			}
		})
	}
}

// fanOut returns YAML where each of n anchors lists the previous one ten
// times: n+1 levels deep, but 10^n leaves if aliases were expanded.
func fanOut(n int) string {
	var b strings.Builder
	b.WriteString("a0: &a0 [1]\n")
	for i := 1; i < n; i++ {
		fmt.Fprintf(&b, "a%d: &a%d [%s*a%d]\n", i, i, strings.Repeat(fmt.Sprintf("*a%d, ", i-1), 9), i-1)
	}
	return b.String()
}

// TestLimits_TwoMegabytesNested is issue 9's crash: 2 MB of nesting in each
// format is one problem found quickly, not a Go stack overflow. (yaml.v3
// stops at 10,000 levels itself, before the line is known.)
func TestLimits_TwoMegabytesNested(t *testing.T) {
	const n = 1 << 20
	const at1 = "nesting deeper than 64 levels at line 1; "
	for _, tt := range []struct{ format, data, want string }{
		{"toml", "a = " + nest("[", "", "]", n), at1},
		{"toml", "a = " + nest("{b=", "1", "}", n/2), at1},
		{"json", nest("[", "", "]", n), at1},
		{"yaml", "a: " + nest("[", "", "]", n), "nesting deeper than 64 levels; "},
	} {
		start := time.Now()
		_, err := Parse([]byte(tt.data), tt.format, Options{})
		var ve *ValidationError
		if !errors.As(err, &ve) || len(ve.Problems) != 1 || !strings.HasPrefix(ve.Problems[0].Msg, tt.want) {
			t.Errorf("%s: got %v, want one problem %q…", tt.format, err, tt.want)
		}
		if d := time.Since(start); d > 10*time.Second { // go-toml alone takes ~3 s on the inline tables
			t.Errorf("%s: took %v; the limit is checked before decoding and should take milliseconds", tt.format, d)
		}
	}
}

// TestLimits_FileSize: a file over 8 MiB is refused without being read
// whole, from Load and from Parse; the 10,000-job benchmark config is far
// below the limit.
func TestLimits_FileSize(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big.yaml")
	big := append([]byte("jobs: []\n#"), make([]byte, 9<<20)...)
	for i := 10; i < len(big); i++ {
		big[i] = 'x'
	}
	if err := os.WriteFile(path, big, 0o600); err != nil {
		t.Fatal(err)
	}
	want := "config too large: 9.0 MiB, limit 8 MiB (a config of 10,000 jobs takes about 1 MiB)"
	_, err := Load(path, Options{})
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Msg != want || ve.File != path {
		t.Errorf("Load: got %v, want the one problem %q", err, want)
	}
	_, err = Parse(big, "yaml", Options{})
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || ve.Problems[0].Msg != want {
		t.Errorf("Parse: got %v, want the one problem %q", err, want)
	}
	if n := len(bigConfig(10000)); n > maxFileBytes/4 {
		t.Errorf("the 10,000-job config takes %d bytes, want it well under the limit of %d", n, maxFileBytes)
	}
}

// TestJSON_DuplicateKeys: a key given twice in one JSON object is an error
// with both lines, as YAML and TOML reject it; equal keys in different
// objects, or keys differing in case, are fine.
func TestJSON_DuplicateKeys(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"top level", "{\"node\": {},\n\"node\": {}}", `invalid JSON at line 2: key "node" is given twice in one object (first at line 1); keep one`},
		{"in a job", `{"jobs": [{"name": "a", "schedule": "@daily",` + "\n" + `"command": "x", "command": "y"}]}`,
			`invalid JSON at line 2: key "command" is given twice in one object (first at line 2); keep one`},
		{"in env", "{\"defaults\": {\"env\": {\"A\": \"1\",\n\n\"A\": \"2\"}}}", `invalid JSON at line 3: key "A" is given twice in one object (first at line 1); keep one`},
		{"escaped the same", `{"log": {}, "l\u006fg": {}}`, `invalid JSON at line 1: key "log" is given twice in one object (first at line 1); keep one`},
		{"different objects", `{"jobs": [{"name": "a", "schedule": "@daily", "command": "x"}, {"name": "b", "schedule": "@daily", "command": "x"}]}`, ""},
		{"case differs", `{"defaults": {"env": {"a": "1", "A": "2"}}}`, ""},
		{"key equal to a value", `{"node": {"id": "id"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := render(problemsOf(t, tt.data, "json", Options{}))
			dup := slices.ContainsFunc(got, func(s string) bool { return strings.Contains(s, "given twice") })
			switch {
			case tt.want == "" && dup:
				t.Errorf("got %q, want no duplicate key", got)
			case tt.want != "" && (len(got) != 1 || got[0] != tt.want):
				t.Errorf("got %q, want the one problem %q", got, tt.want)
			}
		})
	}
}
