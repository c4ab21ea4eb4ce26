package config

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"
)

// jobField describes one field of JobFields: its key and struct index.
type jobField struct {
	key   string
	index int          // in JobFields
	jobIx int          // of the field with the same name in Job
	typ   reflect.Type // the field's type: *string, *time.Duration, *int, *bool, *[]string or map[string]string
}

// jobFieldTable lists JobFields' fields by mapstructure tag, in struct order.
func jobFieldTable() []jobField {
	t := reflect.TypeFor[JobFields]()
	out := make([]jobField, t.NumField())
	for i := range out {
		f := t.Field(i)
		jf, ok := reflect.TypeFor[Job]().FieldByName(f.Name)
		if !ok {
			panic("config: Job lacks JobFields field " + f.Name) // programming error
		}
		out[i] = jobField{key: f.Tag.Get("mapstructure"), index: i, jobIx: jf.Index[0], typ: f.Type}
	}
	return out
}

// jobKeys returns every key a job may have (name, schedule and the JobFields
// keys).
func jobKeys() []string {
	keys := []string{"name", "schedule"}
	for _, f := range jobFieldTable() {
		keys = append(keys, f.key)
	}
	return keys
}

// jobDecoder decodes job mappings; it caches the field table.
type jobDecoder struct {
	d      *decoder
	table  []jobField
	byKey  map[string]jobField
	known  []string // keys allowed in a job
	dknown []string // keys allowed in defaults:
}

func newJobDecoder(d *decoder) *jobDecoder {
	jd := &jobDecoder{d: d, table: jobFieldTable(), byKey: map[string]jobField{}}
	for _, f := range jd.table {
		jd.byKey[f.key] = f
		if f.key != "notify" { // the top-level notify is every job's
			jd.dknown = append(jd.dknown, f.key)
		}
	}
	jd.known = append([]string{"name", "schedule"}, jd.dknown...)
	return jd
}

// fields decodes the JobFields keys of m; prefix is prepended to each key
// to form problem paths. Keys are visited in JobFields' order, then
// unknown keys (reported with a hint) sorted; "name" and
// "schedule" are left to the caller. bad holds the keys whose value could
// not be decoded (already reported).
func (jd *jobDecoder) fields(m map[string]any, prefix string, known []string) (jf JobFields, bad map[string]bool) {
	bad = map[string]bool{}
	var set []int // indexes in jd.table of the keys in m
	var unknown []string
	for k := range m {
		if f, ok := jd.byKey[k]; ok {
			set = append(set, f.index)
		} else if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	slices.Sort(set)
	rv := reflect.ValueOf(&jf).Elem()
	for _, i := range set {
		f := jd.table[i]
		if v := m[f.key]; v != nil { // `key:` with no value is unset
			if x, good := jd.value(prefix+f.key, f.typ, v); good {
				rv.Field(f.index).Set(x)
			} else {
				bad[f.key] = true
			}
		}
	}
	slices.Sort(unknown)
	for _, k := range unknown {
		jd.d.probs.unknownKey(prefix+k, k, known)
	}
	return jf, bad
}

// decode builds job i from its mapping m and checks its name. It returns
// the job (own values merged over inherited, the job `defaults:` and the
// built-in defaults make: jd.inherited), its path (`jobs[2] "backup"`, or
// `jobs[2]` when the name is missing or invalid), its own fields, and the
// keys with a bad value in the job or in `defaults:` (dbad) when
// inherited. seen maps the valid names so far to their job's index.
func (jd *jobDecoder) decode(i int, m map[string]any, inherited *Job, seen map[string]int, dbad map[string]bool) (Job, string, JobFields, map[string]bool) {
	p := jd.d.probs
	var job Job
	var good bool
	nameOK := true
	if v := m["name"]; v != nil {
		job.Name, nameOK = jd.d.str(jobPath(i, "")+": name", v)
	}
	base := jobPath(i, job.Name)
	switch first, dup := seen[job.Name]; {
	case !nameOK:
	case job.Name == "":
		p.err(base, "missing name; every job needs a unique name")
	case !validName(job.Name):
		base = jobPath(i, "") // do not echo an invalid (maybe huge) name in every path
		p.err(base+": name", "%s is not a valid name: use 1-128 of A-Z a-z 0-9 . _ -", quoteShort(job.Name))
	case dup:
		p.err(base+": name", "duplicate name %q (also %s); names must be unique", job.Name, jobPath(first, job.Name))
	default:
		seen[job.Name] = i
	}
	own, bad := jd.fields(m, base+": ", jd.known)
	if v := m["schedule"]; v != nil {
		if job.Schedule, good = jd.d.str(base+": schedule", v); !good {
			bad["schedule"] = true
		}
	}
	for k := range dbad {
		if m[k] == nil {
			bad[k] = true // inherited a value that was reported under defaults.
		}
	}
	jd.merge(&job, own, inherited)
	return job, base, own, bad
}

// quoteShort quotes s, cut to 40 runes with its length noted when longer.
func quoteShort(s string) string {
	r := []rune(s)
	if len(r) <= 40 {
		return fmt.Sprintf("%q", s)
	}
	return fmt.Sprintf("%q… (%d characters)", string(r[:40]), len(r))
}

// sortProblems orders the problems of job i (path base) by key: name,
// schedule, then JobFields' order (timezone, command, …),
// job-level problems first and unknown keys last; the sort is stable.
func (jd *jobDecoder) sortProblems(list []Problem, i int, base string) {
	rank := func(q Problem) int {
		rest, ok := strings.CutPrefix(q.Path, base)
		if !ok {
			rest, _ = strings.CutPrefix(q.Path, jobPath(i, ""))
		}
		rest = strings.TrimPrefix(rest, ": ")
		key := rest
		if key == "" {
			key, _, _ = strings.Cut(q.Msg, " ") // e.g. `schedule "…" never fires`
		}
		if j := strings.IndexAny(key, ".[ "); j >= 0 {
			key = key[:j]
		}
		if n := slices.Index(jd.known, key); n >= 0 {
			return n
		}
		if rest == "" {
			return -1
		}
		return len(jd.known)
	}
	slices.SortStableFunc(list, func(a, b Problem) int { return rank(a) - rank(b) })
}

// value decodes raw into a reflect.Value of type typ (see jobField.typ).
func (jd *jobDecoder) value(path string, typ reflect.Type, raw any) (reflect.Value, bool) {
	d := jd.d
	var x any
	var ok bool
	switch typ {
	case reflect.TypeFor[*string]():
		x, ok = d.str(path, raw)
	case reflect.TypeFor[*time.Duration]():
		x, ok = d.duration(path, raw)
	case reflect.TypeFor[*int]():
		x, ok = d.integer(path, raw)
	case reflect.TypeFor[*bool]():
		x, ok = d.boolean(path, raw)
	case reflect.TypeFor[*[]string]():
		x, ok = d.strings(path, raw)
	case reflect.TypeFor[*Notify]():
		n, good := decodeNotify(d, path, raw)
		return reflect.ValueOf(&n), good
	case reflect.TypeFor[map[string]string]():
		m, good := d.stringMap(path, raw)
		return reflect.ValueOf(m), good
	default:
		panic(fmt.Sprintf("config: JobFields field of unsupported type %v", typ)) // programming error
	}
	if !ok {
		return reflect.Value{}, false
	}
	p := reflect.New(typ.Elem())
	p.Elem().Set(reflect.ValueOf(x))
	return p, true
}
