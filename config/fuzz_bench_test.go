package config

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// The fuzz targets below run on their seeds and on the corpus kept in
// testdata/fuzz/<target> in every `go test`; `go test -fuzz=FuzzParseTOML
// ./config` explores further.

// FuzzLoad checks that Parse never panics (nor overflows the stack) on any
// YAML input, and that a success always yields fully resolved jobs (see
// fuzzParse). Seeds cover nesting around the limit, aliases, fan-out and
// the quote-the-schedule error.
func FuzzLoad(f *testing.F) {
	for _, p := range []string{"../testdata/example.yaml", "../testdata/seed-readme.yaml", "../testdata/invalid/everything.yaml", "../testdata/example-redis.yaml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("jobs: [{name: a, schedule: '@every 1s', command: '${X:-${Y}}'}]"))
	f.Add([]byte("redis: {addresses: [a:1, b:2], db: 99999999999999}\n1: {2: 3}"))
	f.Add([]byte("jobs:\n- name: a\n  schedule: */5 * * * *\n  command: @x\n"))
	f.Add([]byte("a: &a " + nest("[", "1", "]", 40) + "\nb: " + nest("{k: ", "*a", "}", 30) + "\n"))
	f.Add([]byte("notify: {webhooks: [{url: 'http://h/', events: [x], secret_file: ''}, 3]}\n" +
		"jobs: [{name: a, schedule: '@daily', command: x, notify: {webhooks: [{url: '%zz'}]}, warn_after: 1s}]"))
	f.Add([]byte(fanOut(8)))
	f.Add([]byte(yamlBlock(66)))
	for _, n := range []int{63, 64, 10001} {
		f.Add([]byte("jobs: " + nest("[", "", "]", n)))
	}
	f.Add([]byte("jobs:\n- {name: a, schedule: '@daily', command: " + strings.Repeat("x", maxArgStrlen) + "}\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzParse(t, data, "yaml") })
}

// FuzzParseTOML is FuzzLoad for TOML; its seeds stress the nesting scan
// (tomlTooDeep): arrays, inline tables, dotted keys, headers, strings and
// comments holding brackets.
func FuzzParseTOML(f *testing.F) {
	for _, p := range []string{"../testdata/example.toml", "../testdata/seed-readme.toml"} {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("a = " + nest("[", "1", "]", 63)))
	f.Add([]byte("a = " + nest("{b = ", "1", "}", 64)))
	f.Add([]byte("a = " + nest("[{b = ", "1", "}]", 40)))
	f.Add([]byte(strings.Repeat("a.", 63) + "a = 1\n"))
	f.Add([]byte(tomlHeader(63) + "b.c = {d.e = [1]}\n[[x.y]]\nz = 1\n"))
	f.Add([]byte(`a = "[[[\"[["` + "\nb = '''\n[[[\n'''' # [[[\n" + `c = """` + "\n\\\n[[\"\"\"\"\"\n"))
	f.Add([]byte("a = " + nest("[", "", "]", 20000)))
	f.Add([]byte("[[jobs]]\nname = 'a'\nschedule = '@daily'\ncommand = 'x'\nenv = {A = 'b', C = {D = 1}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzParse(t, data, "toml") })
}

// FuzzParseJSON is FuzzLoad for JSON; its seeds stress the token walk
// (checkJSON): nesting and duplicate keys.
func FuzzParseJSON(f *testing.F) {
	f.Add([]byte(`{"node":{"grace_period":"2s"},"jobs":[{"name":"a","schedule":"@daily","command":"true","env":{"A":"1"}}]}`))
	f.Add([]byte(`{"a": 1, "a": 2, "b": {"a": [{"a": 1, "\u0061": 2}]}}`))
	f.Add([]byte(nest(`{"a": `, "1", "}", 64)))
	f.Add([]byte(nest("[", "", "]", 65)))
	f.Add([]byte(nest("[", "", "]", 10001)))
	f.Add([]byte(`{"jobs": [{"name": "a", "schedule": "@daily", "command": "` + strings.Repeat("x", maxArgStrlen) + `"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) { fuzzParse(t, data, "json") })
}

// fuzzParse is the property of the fuzz targets: Parse returns (no panic,
// no stack overflow); whatever decodes after the input limits passed nests
// at most maxDepth levels (the scans before decoding are upper bounds); a
// successful Parse has resolved jobs.
func fuzzParse(t *testing.T, data []byte, format string) {
	if raw, err := decodeRaw(data, format); err == nil {
		if d := treeDepth(raw, maxDepth+1); d > maxDepth {
			t.Fatalf("decoded a tree %d levels deep after the depth check passed", d)
		}
	}
	cfg, err := Parse(data, format, Options{Environ: []string{"X=1"}, Hostname: "h"})
	if err != nil {
		return
	}
	for _, j := range cfg.Jobs {
		if j.Sched == nil || j.Location == nil || j.LockTTL <= 0 {
			t.Fatalf("job %q not resolved: %+v", j.Name, j)
		}
	}
}

// treeDepth returns the nesting depth of a decoded value (each mapping or
// list is one level), counting at most limit levels.
func treeDepth(v any, limit int) int {
	if limit == 0 {
		return 0
	}
	var kids []any
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			kids = append(kids, e)
		}
	case map[any]any:
		for k, e := range x {
			kids = append(kids, k, e)
		}
	case []any:
		kids = x
	default:
		return 0
	}
	d := 0
	for _, k := range kids {
		d = max(d, treeDepth(k, limit-1))
	}
	return d + 1
}

// bigConfig returns a YAML config with n jobs; most schedules are distinct
// (minute and hour vary), so the schedule cache does not flatter the result.
func bigConfig(n int) []byte {
	var b strings.Builder
	b.WriteString("redis: {address: 'localhost:6379'}\ndefaults: {timeout: 5m, env: {A: b}}\njobs:\n")
	scheds := []string{"%d %d * * *", "%d %d * * 1-5", "30 %d %d * * *", "CRON_TZ=Europe/Berlin %d %d 1,15 * *", "%d */%d * * *"}
	for i := range n {
		s := fmt.Sprintf(scheds[i%len(scheds)], i%60, i/60%23+1)
		fmt.Fprintf(&b, "  - name: job-%d\n    schedule: %q\n    command: echo ${HOME:-/} %d\n    timezone: UTC\n", i, s, i)
	}
	return []byte(b.String())
}

// BenchmarkLoad10k measures parsing and validating 10,000 jobs (target:
// under 1 s).
func BenchmarkLoad10k(b *testing.B) {
	data := bigConfig(10000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		cfg, err := Parse(data, "yaml", Options{})
		if err != nil || len(cfg.Jobs) != 10000 {
			b.Fatal(err)
		}
	}
}

func TestLoad10k(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	cfg, err := Parse(bigConfig(10000), "yaml", Options{})
	if err != nil || len(cfg.Jobs) != 10000 {
		t.Fatal(err)
	}
}

// bigJSON returns n jobs as one line of JSON (a generated file), the shape
// `make bench`'s load10k workload loads.
func bigJSON(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"node":{"id":"bench"},"jobs":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"command":"true","name":"job-%d","schedule":"%d %d * * *"}`, i, i%60, i/60%24)
	}
	b.WriteString("]}")
	return []byte(b.String())
}

// BenchmarkLoad10kJSON measures parsing and validating 10,000 jobs given
// as one line of JSON.
func BenchmarkLoad10kJSON(b *testing.B) {
	data := bigJSON(10000)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		cfg, err := Parse(data, "json", Options{})
		if err != nil || len(cfg.Jobs) != 10000 {
			b.Fatal(err)
		}
	}
}
