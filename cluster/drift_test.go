package cluster

import (
	"reflect"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func TestCompare(t *testing.T) {
	self := map[string]string{"a": "1", "b": "1", "only-here": "1"}
	others := map[string]map[string]string{
		"n2": {"a": "1", "b": "2", "only-here": "1", "only-there": "1"},
		"n3": {"a": "1", "b": "2"},
	}
	want := []Diff{
		{Job: "b", Kind: Changed, Nodes: []string{"n2", "n3"}},
		{Job: "only-here", Kind: Added, Nodes: []string{"n3"}},
		{Job: "only-there", Kind: Removed, Nodes: []string{"n2"}},
	}
	if got := Compare(self, others); !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if got := Compare(self, map[string]map[string]string{"n2": {"a": "1", "b": "1", "only-here": "1"}}); got != nil {
		t.Errorf("same jobs: got %+v, want nil", got)
	}
	if got := Compare(self, nil); got != nil {
		t.Errorf("no other node: got %+v, want nil", got)
	}
}

func TestCluster(t *testing.T) {
	nodes := map[string]map[string]string{
		"n1": {"a": "1", "b": "1", "extra": "1"},
		"n2": {"a": "1", "b": "2"},
		"n3": {"a": "1", "b": "1"},
	}
	want := []Job{
		{Job: "b", On: []string{"n1", "n2", "n3"}, Versions: 2},
		{Job: "extra", On: []string{"n1"}, Missing: []string{"n2", "n3"}, Versions: 1},
	}
	got := Cluster(nodes)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if s := got[1].String(); s != "extra: only on n1 (not on n2, n3)" {
		t.Errorf("String = %q", s)
	}
	if s := got[0].String(); s != "b: 2 configurations on n1, n2, n3" {
		t.Errorf("String = %q", s)
	}
}

// A drift is logged once per change: the same differences at the next
// beat log nothing; other differences log again; agreement logs "over"
// once.
func TestDetector_LogsOncePerChange(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	d := NewDetector(zap.New(core), nil)
	self := map[string]string{"a": "1"}
	d.Observe(self, map[string]map[string]string{"n2": {"a": "1"}})
	d.Observe(self, map[string]map[string]string{"n2": {"a": "2"}})
	d.Observe(self, map[string]map[string]string{"n2": {"a": "2"}})
	d.Observe(self, map[string]map[string]string{"n2": {"a": "2", "b": "1"}})
	d.Observe(self, map[string]map[string]string{"n2": {"a": "1"}})
	d.Observe(self, map[string]map[string]string{"n2": {"a": "1"}})
	var msgs []string
	for _, e := range logs.All() {
		msgs = append(msgs, e.Level.String()+" "+e.Message[:len("config drift")+5])
	}
	want := []string{"warn config drift: thi", "warn config drift: thi", "info config drift over"}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("got %q, want %q", msgs, want)
	}
}
