package config

import (
	"fmt"
	"reflect"
	"regexp"
	"strings"
)

// Node tags (node.tags) and the job selectors that require them (a job's
// nodes: ["key=value", …]): keys are lower case, values are case
// sensitive; neither holds "=", "," or spaces, so both can be written in
// one environment variable (CRONLOCK_NODE_TAGS=role=db,zone=a).
var (
	tagKeyPattern   = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)
	tagValuePattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,63}$`)
)

const tagRule = "keys are 1-63 of a-z 0-9 . _ - (lower case), values 1-63 of A-Z a-z 0-9 . _ -"

// tagMap decodes node.tags: a mapping {key: value} from a file, or
// "key=value,key=value" from the environment or a flag (weak decoding).
// Problems are reported at path (or path.key); ok is false after one.
func (d *decoder) tagMap(path string, v any) (map[string]string, bool) {
	if s, isStr := v.(string); isStr && d.weak {
		return d.tagList(path, s)
	}
	m, ok := asMap(v)
	if !ok {
		d.probs.err(path, "want a mapping of key: value, e.g. {role: db}, got %s", describe(v))
		return nil, false
	}
	out := make(map[string]string, len(m))
	for _, k := range sortedKeys(m) { // every bad tag is reported, in a stable order
		val, good := d.str(path+"."+k, m[k])
		if good {
			good = checkTag(d.probs, path+"."+k, k, val)
		}
		ok = ok && good
		out[k] = val
	}
	return out, ok
}

// tagList decodes "key=value,key=value".
func (d *decoder) tagList(path, s string) (map[string]string, bool) {
	out := map[string]string{}
	ok := true
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		k, val, found := strings.Cut(item, "=")
		if !found {
			d.probs.err(path, "%q is not key=value; write e.g. role=db,zone=a", item)
			ok = false
			continue
		}
		ok = checkTag(d.probs, path, k, val) && ok
		out[k] = val
	}
	return out, ok
}

// checkTag reports a tag key or value that breaks tagRule.
func checkTag(p *problems, path, key, val string) bool {
	if !tagKeyPattern.MatchString(key) || !tagValuePattern.MatchString(val) {
		p.err(path, "%s=%s is not a valid tag: %s", quoteShort(key), quoteShort(val), tagRule)
		return false
	}
	return true
}

// isMapKey reports whether key (e.g. "node.tags") takes a mapping.
func isMapKey(key string) bool {
	for _, k := range keyTable {
		if k.key == key {
			return k.typ.Kind() == reflect.Map
		}
	}
	return false
}

// checkMapKeyCase reports the keys of a mapping value (node.tags) that are
// not lower case: viper reads keys case-insensitively and would silently
// lower them, so a job's nodes: "Role=db" would never match.
func checkMapKeyCase(p *problems, path string, val any) {
	m, ok := asMap(val)
	if !ok {
		return
	}
	for _, k := range sortedKeys(m) {
		if k != strings.ToLower(k) {
			p.err(path+"."+k, "tag keys are lower case: write %q", strings.ToLower(k))
		}
	}
}

// checkSelectors reports the entries of a job's nodes: that are not
// "key=value" with a valid tag, and a key given twice.
func checkSelectors(p *problems, path string, sel []string) {
	seen := map[string]int{}
	for i, s := range sel {
		ip := fmt.Sprintf("%s[%d]", path, i)
		k, v, found := strings.Cut(s, "=")
		switch {
		case !found:
			p.err(ip, "%s is not key=value; write e.g. \"role=db\" (a node claims the job when its node.tags has every key=value listed)", quoteShort(s))
		case !tagKeyPattern.MatchString(k) || !tagValuePattern.MatchString(v):
			p.err(ip, "%s is not a valid tag: %s", quoteShort(s), tagRule)
		default:
			if j, dup := seen[k]; dup {
				p.err(ip, "key %q is also given in nodes[%d]; a node has one value per key, so no node could match both", k, j)
			}
			seen[k] = i
		}
	}
}

// SelectorsMatch reports whether a node with tags may run a job whose
// nodes: is selectors: every "key=value" of selectors is in tags. No
// selectors match every node. (package cluster applies it to jobs and
// live nodes; package cluster to the nodes that rank for a claim.)
func SelectorsMatch(selectors []string, tags map[string]string) bool {
	for _, s := range selectors {
		k, v, _ := strings.Cut(s, "=")
		if got, ok := tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}
