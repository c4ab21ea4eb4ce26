package config

import (
	"reflect"
	"slices"
	"strings"
)

// field binds one scalar config key outside `jobs`/`defaults` to the Config
// field that receives it. ptr is *string, *time.Duration, *int, *bool,
// *[]string or *map[string]string (the types setField decodes).
type field struct {
	key string
	ptr any
}

// configKey is one key outside `jobs`/`defaults`, named by the mapstructure
// tags of Config and of its section structs.
type configKey struct {
	key   string       // dotted path, e.g. "redis.tls.ca_file"
	index []int        // of the field in Config, for reflect.Value.FieldByIndex
	typ   reflect.Type // a struct type makes the key a section (a mapping of settings)
}

func (k configKey) section() bool { return k.typ.Kind() == reflect.Struct }

// jobSections are the top-level keys decoded by loadJobs (and loadNotify)
// rather than as scalar settings.
var jobSections = []string{"defaults", "jobs", "notify"}

// keyTable lists the sections and scalar keys outside `jobs`/`defaults` in
// struct order, each section before its keys (node, node.id, …, redis,
// …, redis.tls, redis.tls.enabled, …). Adding a tagged field to Config or
// to one of its section structs adds the key everywhere: file, CRONLOCK_*
// environment, flags and the unknown-key check.
var keyTable = buildKeyTable(reflect.TypeFor[Config](), "", nil)

// buildKeyTable walks struct type t, whose keys are prefix + tag. Fields
// tagged "-" are skipped; a field without a tag is a programming error
// (mapstructure would silently use the Go field name).
func buildKeyTable(t reflect.Type, prefix string, index []int) []configKey {
	var out []configKey
	for i := range t.NumField() {
		f := t.Field(i)
		name := f.Tag.Get("mapstructure")
		switch {
		case name == "-":
			continue
		case name == "":
			panic("config: field " + t.Name() + "." + f.Name + " has no mapstructure tag") // programming error
		case prefix == "" && slices.Contains(jobSections, name):
			continue
		}
		k := configKey{key: prefix + name, index: append(slices.Clone(index), i), typ: f.Type}
		out = append(out, k)
		if k.section() {
			out = append(out, buildKeyTable(f.Type, k.key+".", k.index)...)
		}
	}
	return out
}

// fields lists every scalar key outside `jobs` and `defaults`, bound to
// c's fields: the keys that environment variables (CRONLOCK_ + key with
// "." → "_", upper case) and flags may override.
func (c *Config) fields() []field {
	rv := reflect.ValueOf(c).Elem()
	var out []field
	for _, k := range keyTable {
		if !k.section() {
			out = append(out, field{k.key, rv.FieldByIndex(k.index).Addr().Interface()})
		}
	}
	return out
}

// sections are the mapping keys outside `jobs`/`defaults`: node, lock,
// redis, redis.tls, log, http.
var sections = func() []string {
	var out []string
	for _, k := range keyTable {
		if k.section() {
			out = append(out, k.key)
		}
	}
	return out
}()

// EnvName returns the environment variable that overrides key, e.g.
// "redis.address" → "CRONLOCK_REDIS_ADDRESS".
func EnvName(key string) string {
	return "CRONLOCK_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// Keys returns every scalar key outside `jobs` and `defaults`, in the
// order of the configuration reference (the order of Config's fields).
func Keys() []string {
	var out []string
	for _, k := range keyTable {
		if !k.section() {
			out = append(out, k.key)
		}
	}
	return out
}

// knownChildren returns the key names allowed directly under prefix ("" for
// the top level, else a section followed by "."), in struct order.
func knownChildren(prefix string) []string {
	var out []string
	for _, k := range keyTable {
		if rest, ok := strings.CutPrefix(k.key, prefix); ok && !strings.Contains(rest, ".") {
			out = append(out, rest)
		}
	}
	if prefix == "" {
		out = append(out, jobSections...)
	}
	return out
}
