package config

import "go.yaml.in/yaml/v3"

// yamlPlainMap converts doc, a parsed YAML document, to the map that
// yaml.v3's doc.Decode(&map[string]any{}) returns, for the common shape of
// a config: mappings whose keys are plain or quoted strings given once,
// lists, and scalars. It returns ok == false, and the caller decodes the
// whole document with yaml.v3 instead, when the document holds anything
// else: an alias, a merge key (`<<`), a key that is not a string scalar,
// a key given twice, a root that is not a mapping, a tagged mapping or
// list, or a scalar yaml.v3 cannot decode (those errors are yaml.v3's to
// word).
//
// Why not doc.Decode alone: it decodes every node through reflection, a
// seventh of config.Load for 10,000 jobs (BenchmarkLoad10k). Every scalar
// that is not a string (numbers, booleans, null, timestamps, !!binary) is
// still decoded by yaml.v3 itself (the node's Decode), so the types and
// values follow its rules (YAML 1.2 core schema plus its YAML 1.1 extras);
// FuzzYAMLPlainMap checks that the two agree on every input.
func yamlPlainMap(doc *yaml.Node) (map[string]any, bool) {
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, false
	}
	v, ok := yamlPlainValue(doc.Content[0])
	if !ok {
		return nil, false
	}
	return v.(map[string]any), true
}

// strTag is yaml.v3's short tag of a string scalar (Node.ShortTag).
const strTag = "!!str"

// yamlPlainValue converts n as yamlPlainMap describes; ok is false where
// yaml.v3 must decode the whole document.
func yamlPlainValue(n *yaml.Node) (any, bool) {
	if n.Kind != yaml.ScalarNode && n.Style&yaml.TaggedStyle != 0 {
		return nil, false // a tagged mapping or list: yaml.v3 decides
	}
	switch n.Kind {
	case yaml.MappingNode:
		if len(n.Content)%2 != 0 {
			return nil, false
		}
		m := make(map[string]any, len(n.Content)/2)
		for i := 0; i < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode || k.Value == "<<" || k.ShortTag() != strTag {
				return nil, false
			}
			if _, dup := m[k.Value]; dup {
				return nil, false
			}
			v, ok := yamlPlainValue(n.Content[i+1])
			if !ok {
				return nil, false
			}
			m[k.Value] = v
		}
		return m, true
	case yaml.SequenceNode:
		s := make([]any, len(n.Content))
		for i, c := range n.Content {
			v, ok := yamlPlainValue(c)
			if !ok {
				return nil, false
			}
			s[i] = v
		}
		return s, true
	case yaml.ScalarNode:
		if n.ShortTag() == strTag {
			return n.Value, true
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, false
		}
		return v, true
	}
	return nil, false
}
