package config

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
)

// TestValidate_NodeTargeting: node.tags (file or CRONLOCK_NODE_TAGS), a
// job's nodes: and node.max_parallel are decoded, and each malformed entry is one problem naming
// the fix.
func TestValidate_NodeTargeting(t *testing.T) {
	cfg, err := Parse([]byte("node: {tags: {role: db, zone: eu-1}}\n"+job("  nodes: [role=db]\n")), "yaml", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"role": "db", "zone": "eu-1"}; !maps.Equal(cfg.Node.Tags, want) || !slices.Equal(cfg.Jobs[0].Nodes, []string{"role=db"}) {
		t.Errorf("tags %v nodes %v, want %v and [role=db]", cfg.Node.Tags, cfg.Jobs[0].Nodes, want)
	}
	cfg, err = Parse([]byte("node: {tags: {role: db}}\ndefaults: {nodes: [zone=a]}\n"+job("")), "yaml",
		Options{Environ: []string{"CRONLOCK_NODE_TAGS=role=web, zone=a"}})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"role": "web", "zone": "a"}; !maps.Equal(cfg.Node.Tags, want) || !slices.Equal(cfg.Jobs[0].Nodes, []string{"zone=a"}) {
		t.Errorf("env tags %v, inherited nodes %v; want %v and [zone=a]", cfg.Node.Tags, cfg.Jobs[0].Nodes, want)
	}

	bad := []struct {
		name, yaml string
		environ    []string
		want       string
	}{
		{"upper-case tag key", "node: {tags: {Role: db}}\n", nil, `node.tags.Role: tag keys are lower case: write "role"`},
		{"tag value with a space", "node: {tags: {role: 'd b'}}\n", nil, `node.tags.role: "role"="d b" is not a valid tag`},
		{"tags not a mapping", "node: {tags: [role=db]}\n", nil, `node.tags: want a mapping of key: value`},
		{"env item without =", "", []string{"CRONLOCK_NODE_TAGS=role"}, `node.tags (from CRONLOCK_NODE_TAGS): "role" is not key=value; write e.g. role=db,zone=a`},
		{"selector without =", job("  nodes: [db]\n"), nil, `jobs[0] "j": nodes[0]: "db" is not key=value; write e.g. "role=db"`},
		{"selector key upper case", job("  nodes: [Role=db]\n"), nil, `jobs[0] "j": nodes[0]: "Role=db" is not a valid tag`},
		{"selector key twice", job("  nodes: [role=db, role=web]\n"), nil, `jobs[0] "j": nodes[1]: key "role" is also given in nodes[0]; a node has one value per key`},
		{"mapping for a string key", "node: {id: {A: 1}}\n", nil, `node.id: want a string`},
		{"max_parallel negative", "node: {max_parallel: -1}\n", nil, `node.max_parallel: -1 is negative; use 0 for no limit`},
		{"nodes not a list", job("  nodes: role=db\n"), nil, `jobs[0] "j": nodes: want a list, got the string "role=db"; write ["role=db"]`},
	}
	for _, tt := range bad {
		_, err := Parse([]byte(tt.yaml), "yaml", Options{Environ: tt.environ})
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: got %v, want a problem containing %q", tt.name, err, tt.want)
		}
		if tt.name == "mapping for a string key" && strings.Contains(err.Error(), "lower case") {
			t.Errorf("%s: got %v, want no tag-key problem outside node.tags", tt.name, err)
		}
	}
}

// Every bad tag of node.tags is reported, not only the first one met (the
// check stopped at the first, and map order made it a different one at
// each run).
func TestValidate_EveryBadTagReported(t *testing.T) {
	ps := render(problemsOf(t, "node: {tags: {\"a b\": c, \"\": x, ok: \"\", role: db}}\n"+job(""), "yaml", Options{}))
	for _, want := range []string{`node.tags.a b: "a b"="c"`, `node.tags.: ""="x"`, `node.tags.ok: "ok"=""`} {
		if !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, want) }) {
			t.Errorf("got problems %q, want one containing %q", ps, want)
		}
	}
	if len(ps) != 3 {
		t.Errorf("got %d problems %q, want 3", len(ps), ps)
	}
}
