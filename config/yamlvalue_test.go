package config

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzYAMLPlainMap checks yamlPlainMap against yaml.v3's own decoding of
// the same document (doc.Decode into a map, what decodeYAML did before):
// wherever the fast path answers, the map is deeply equal to yaml.v3's,
// types included, and yaml.v3 decodes that document without an error.
// Seeds: every YAML file under testdata, and the shapes the fast path
// hands back to yaml.v3 (aliases, merge keys, non-string and repeated
// keys, tags, a root that is not a mapping).
func FuzzYAMLPlainMap(f *testing.F) {
	paths, _ := filepath.Glob("../testdata/*.yaml")
	more, _ := filepath.Glob("../testdata/invalid/*.yaml")
	for _, p := range append(paths, more...) {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"a: 1\nb: [1, 2.5, true, ~, null, '', \"x\", 0x1F, .inf, -.Inf, .nan, 2024-01-02, 1_000]\nc: {d: e}\n",
		"a: &x {b: 1}\nc: *x\n",
		"base: &b {x: 1}\njob:\n  <<: *b\n  y: 2\n",
		"'<<': {a: 1}\n",
		"1: a\ntrue: b\n~: c\n",
		"a: 1\na: 2\n",
		"a: !!binary aGVsbG8=\nb: !!binary '!!!'\nc: !!str 12\nd: !!int '12'\ne: !!float 1\nf: !custom x\ng: !!int zz\n",
		"- a\n- b\n",
		"plain scalar",
		"~",
		"a: |\n  line\n  two\nb: >\n  folded\n",
		"a: [{b: [{c: [1]}]}]\n",
		"? [a]\n: b\n",
		"a: !!map {b: 1}\nc: !!seq [1]\n",
		"a: 9223372036854775808\nb: -9223372036854775809\nc: 0o17\nd: 0b101\ne: +12\nf: 1e3\n",
		"a: yes\nb: on\nc: Off\nd: NO\ne: y\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var doc yaml.Node
		if err := yaml.Unmarshal(data, &doc); err != nil || doc.Kind == 0 {
			return
		}
		if yamlTooDeep(&doc) > 0 {
			return // decodeYAML rejects it before decoding
		}
		fast, ok := yamlPlainMap(&doc)
		if !ok {
			return
		}
		want := map[string]any{}
		if err := doc.Decode(&want); err != nil {
			t.Fatalf("yamlPlainMap answered %#v where yaml.v3 fails: %v", fast, err)
		}
		if !sameValue(fast, want) {
			t.Fatalf("yamlPlainMap:\n%#v\nyaml.v3:\n%#v", fast, want)
		}
	})
}

// TestYAMLPlainMap_HandsBack lists documents the fast path must leave to
// yaml.v3, each for the reason named, and one it must take.
func TestYAMLPlainMap_HandsBack(t *testing.T) {
	for name, src := range map[string]string{
		"alias":          "a: &x 1\nb: *x\n",
		"merge key":      "a: {<<: {b: 1}}\n",
		"quoted merge":   "a: {'<<': {b: 1}}\n",
		"int key":        "1: a\n",
		"repeated key":   "a: 1\na: 2\n",
		"list root":      "- a\n",
		"scalar root":    "a\n",
		"bad binary":     "a: !!binary '!!!'\n",
		"bad int":        "a: !!int zz\n",
		"complex key":    "? [a]\n: b\n",
		"nested alias":   "a: &x [1]\nb: [c, *x]\n",
		"null root":      "~\n",
		"mapping as str": "a: !!str {b: 1}\n",
	} {
		var doc yaml.Node
		if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if m, ok := yamlPlainMap(&doc); ok {
			t.Errorf("%s: fast path answered %#v; yaml.v3 must decode %q", name, m, src)
		}
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte("a: [1, x, ~]\nb: {c: true}\n"), &doc); err != nil {
		t.Fatal(err)
	}
	m, ok := yamlPlainMap(&doc)
	want := map[string]any{"a": []any{1, "x", nil}, "b": map[string]any{"c": true}}
	if !ok || !reflect.DeepEqual(m, want) {
		t.Fatalf("got %#v, %v; want %#v", m, ok, want)
	}
}

// sameValue is reflect.DeepEqual for decoded YAML, except that NaN equals
// NaN (`.nan` decodes to one).
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		if y, ok := b.(float64); ok && math.IsNaN(x) && math.IsNaN(y) {
			return true
		}
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			if w, ok := y[k]; !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return reflect.DeepEqual(a, b)
}
