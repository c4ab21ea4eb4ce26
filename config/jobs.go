package config

import (
	"fmt"
	"reflect"
	"slices"
	"time"
)

// jobField describes one field of JobFields: its key and struct index.
type jobField struct {
	key   string
	index int          // in JobFields
	jobIx int          // of the field with the same name in Job
	typ   reflect.Type // the field's type: *string, *time.Duration, *int, *bool or map[string]string
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
		jd.dknown = append(jd.dknown, f.key)
	}
	jd.known = append([]string{"name", "schedule"}, jd.dknown...)
	return jd
}

// fields decodes the JobFields keys of m; prefix is prepended to each key
// to form problem paths. Keys other than known are reported as unknown
// (with a hint); "name" and "schedule" are left to the caller.
func (jd *jobDecoder) fields(m map[string]any, prefix string, known []string) JobFields {
	var jf JobFields
	rv := reflect.ValueOf(&jf).Elem()
	for _, k := range sortedKeys(m) {
		f, ok := jd.byKey[k]
		switch {
		case !ok && !slices.Contains(known, k):
			jd.d.probs.unknownKey(prefix+k, k, known)
		case !ok || m[k] == nil: // name/schedule, or `key:` with no value
		default:
			if v, good := jd.value(prefix+k, f.typ, m[k]); good {
				rv.Field(f.index).Set(v)
			}
		}
	}
	return jf
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

// builtinJobDefaults are the job defaults of SPEC.md §2.
func builtinJobDefaults() JobFields {
	return JobFields{
		Shell:        ptr("/bin/sh"),
		KillGrace:    ptr(10 * time.Second),
		Enabled:      ptr(true),
		Overlap:      ptr(OverlapSkip),
		OnLockLost:   ptr(LockLostKill),
		RetryBackoff: ptr(10 * time.Second),
		HookTimeout:  ptr(time.Minute),
	}
}

func ptr[T any](v T) *T { return &v }

// merge returns the effective job fields: for each field the job's own
// value, else `defaults:`, else the built-in default. Env maps are merged
// key-wise (the job's value wins).
func (jd *jobDecoder) merge(job *Job, layers ...JobFields) {
	dst := reflect.ValueOf(job).Elem()
	for _, f := range jd.table {
		if f.typ.Kind() != reflect.Pointer {
			continue // env, merged below
		}
		for i := range layers { // highest precedence first
			src := reflect.ValueOf(&layers[i]).Elem().Field(f.index)
			if !src.IsNil() {
				dst.Field(f.jobIx).Set(src.Elem())
				break
			}
		}
	}
	env := map[string]string{}
	for i := len(layers) - 1; i >= 0; i-- {
		for k, v := range layers[i].Env {
			env[k] = v
		}
	}
	job.Env = env
}
