package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Input limits. No config input may crash the process (issue 9): go-toml
// parses nested inline arrays and tables recursively and a 2 MB file of
// `[` overflows the Go stack, which no recover() catches. So size and
// nesting depth are checked before anything decodes the file. yaml.v3
// and encoding/json bound depth themselves (10,000 levels), but an error
// that names our limit and the line is clearer than theirs.
const (
	// maxFileBytes bounds a config file: 8 MiB. The 10,000-job config of
	// BenchmarkLoad10k (bigConfig in fuzz_bench_test.go) takes 1.0 MiB, so
	// this leaves about 800 bytes per job for 10,000 jobs.
	maxFileBytes = 8 << 20
	// maxDepth bounds nesting, counting mappings and lists: the top-level
	// mapping is level 1, `jobs` 2, a job 3, its `env` 4.
	maxDepth = 64
)

// tooLarge is the problem for a file of n bytes (n > maxFileBytes).
func tooLarge(n int64) string {
	return fmt.Sprintf("config too large: %.1f MiB, limit %d MiB (a config of 10,000 jobs takes about 1 MiB)",
		float64(n)/(1<<20), maxFileBytes>>20)
}

// tooDeep is the problem for nesting deeper than maxDepth at line (0 =
// unknown).
func tooDeep(line int) string {
	at := ""
	if line > 0 {
		at = fmt.Sprintf(" at line %d", line)
	}
	return fmt.Sprintf("nesting deeper than %d levels%s; a cronlock config nests 4 levels "+
		"(top level, jobs, a job, its env)", maxDepth, at)
}

// decodeYAML parses data into yaml.v3's node tree, checks its depth
// (yamlTooDeep), then decodes the first document into a map as viper's
// YAML codec does: yamlPlainMap for the usual shape, yaml.v3's own
// decoder for anything else. A file with only comments is an empty config.
func decodeYAML(data []byte) (map[string]any, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		// yaml.v3's scanner stops at 10,000 levels with an untyped error
		// ("yaml: exceeded max depth of 10000", scannerc.go) and no line;
		// its text is the only way to tell it from a syntax error.
		if strings.Contains(err.Error(), "exceeded max depth of") {
			return nil, inputError(tooDeep(0))
		}
		return nil, err
	}
	raw := map[string]any{}
	if doc.Kind == 0 {
		return raw, nil
	}
	if line := yamlTooDeep(&doc); line > 0 {
		return nil, inputError(tooDeep(line))
	}
	if m, ok := yamlPlainMap(&doc); ok {
		return m, nil
	}
	if err := doc.Decode(&raw); err != nil {
		return nil, err
	}
	return raw, nil
}

// inputError is a problem found before or instead of decoding, already
// worded for the user (syntaxError passes it through).
type inputError string

func (e inputError) Error() string { return string(e) }

// yamlTooDeep returns the line of the first mapping or list nested deeper
// than maxDepth levels in doc, or 0. An alias counts as the node it refers
// to, at the alias's level, and the line reported is the alias's. Each
// anchored node is walked again only at a deeper level than before (at most
// maxDepth times), so many aliases of one anchor cost linear time; an alias
// inside its own anchor is left to the decoder, which rejects it.
func yamlTooDeep(doc *yaml.Node) int {
	w := yamlWalk{walked: map[*yaml.Node]int{}, open: map[*yaml.Node]bool{}}
	return w.node(doc, 0, 0)
}

type yamlWalk struct {
	walked map[*yaml.Node]int  // anchored node → deepest level walked without a finding
	open   map[*yaml.Node]bool // anchored nodes being walked (cycle guard)
}

// node walks n at level (its parent's level; a document adds none). via is
// the line of the outermost alias on the path, or 0.
func (w *yamlWalk) node(n *yaml.Node, level, via int) int {
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias == nil || w.open[n.Alias] {
			return 0
		}
		if via == 0 {
			via = n.Line
		}
		return w.node(n.Alias, level, via)
	case yaml.MappingNode, yaml.SequenceNode:
		level++
	case yaml.DocumentNode:
	default:
		return 0
	}
	if level > maxDepth {
		if via > 0 {
			return via
		}
		return n.Line
	}
	if n.Anchor != "" {
		if d, ok := w.walked[n]; ok && d >= level {
			return 0
		}
		w.open[n] = true
		defer delete(w.open, n)
	}
	for _, c := range n.Content {
		if line := w.node(c, level, via); line > 0 {
			return line
		}
	}
	if n.Anchor != "" {
		w.walked[n] = level
	}
	return 0
}

// checkJSON walks data's tokens with encoding/json's Decoder (which keeps
// no recursion) before data is decoded. It reports the first value nested
// deeper than maxDepth and the first key given twice in one object:
// encoding/json keeps the last value of a repeated key without a word,
// where YAML and TOML reject the file. A syntax error ends the walk without
// a finding; the decoder then reports it with its position.
func checkJSON(data []byte) error {
	type object struct {
		keys    map[string]int // key → line
		wantKey bool
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var stack []*object // nil entries are lists
	// The line is counted on from the previous token, not from the start
	// (lineCol per token made a one-line file of 10,000 jobs take 8 s).
	pos, line := 0, 1
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		if off := min(max(int(dec.InputOffset())-1, 0), len(data)); off > pos {
			line += bytes.Count(data[pos:off], []byte("\n"))
			pos = off
		}
		var top *object
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if s, ok := tok.(string); ok && top != nil && top.wantKey {
			if first, dup := top.keys[s]; dup {
				return inputError(fmt.Sprintf("invalid JSON at line %d: key %q is given twice in one object (first at line %d); keep one", line, s, first))
			}
			top.keys[s], top.wantKey = line, false
			continue
		}
		if top != nil {
			top.wantKey = true // this token is (or opens) the value of a key
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			if len(stack) == maxDepth {
				return inputError(tooDeep(line))
			}
			var o *object
			if tok == json.Delim('{') {
				o = &object{keys: map[string]int{}, wantKey: true}
			}
			stack = append(stack, o)
		case json.Delim('}'), json.Delim(']'):
			stack = stack[:len(stack)-1]
		}
	}
}
