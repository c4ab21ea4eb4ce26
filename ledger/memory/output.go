package memory

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cronlock/cronlock/ledger"
)

// Output is the process-local ledger.OutputStore of the memory backend:
// kept outputs and live chunks in mutex-guarded maps, never persisted (a
// restart forgets them), expired on access. Followers wait on a channel
// that every publish closes. It owns no goroutines; its methods are safe
// for concurrent use and block only in FollowOutput (up to block, or until
// ctx ends).
type Output struct {
	mu      sync.Mutex
	kept    map[string]map[string]keptOutput // job → occurrence id → output
	live    map[string]*liveOutput           // job + "\x00" + occurrence id
	hooks   map[string]map[string]keptHooks  // job → occurrence id → hook results
	changed chan struct{}                    // closed and replaced by every publish
}

type keptOutput struct {
	data  []byte
	until time.Time
}

type keptHooks struct {
	results []ledger.HookResult
	until   time.Time
}

type liveOutput struct {
	chunks []ledger.OutputChunk // at most ledger.MaxLiveChunks, IDs 1, 2, … as text
	next   int64
	until  time.Time
}

var (
	_ ledger.OutputStore = (*Output)(nil)
	_ ledger.HookStore   = (*Output)(nil)
)

// NewOutput returns an empty Output.
func NewOutput() *Output {
	return &Output{kept: map[string]map[string]keptOutput{}, live: map[string]*liveOutput{},
		hooks: map[string]map[string]keptHooks{}, changed: make(chan struct{})}
}

// StoreOutput keeps a copy of out for keep's age; at most keep.Max
// occurrences per job keep output, the first to expire goes first.
func (o *Output) StoreOutput(ctx context.Context, job, occ string, out []byte, keep ledger.Retention) error {
	ttl, maxN := keep.Resolved()
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	m := entries(o.kept, job)
	for id, k := range m {
		if !now.Before(k.until) {
			delete(m, id)
		}
	}
	m[occ] = keptOutput{data: slices.Clone(out), until: now.Add(ttl)}
	bound(m, maxN, func(k keptOutput) time.Time { return k.until })
	return nil
}

// Output returns the kept output, or ledger.ErrNoOutput.
func (o *Output) Output(ctx context.Context, job, occ string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	k, ok := o.kept[job][occ]
	if !ok || !time.Now().Before(k.until) {
		return nil, ledger.ErrNoOutput
	}
	return slices.Clone(k.data), nil
}

// PublishOutput appends a copy of c and wakes the followers.
func (o *Output) PublishOutput(ctx context.Context, job, occ string, c ledger.OutputChunk, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	key := job + "\x00" + occ
	l := o.live[key]
	if l == nil {
		for k, old := range o.live { // a new stream: forget the expired ones
			if !now.Before(old.until) {
				delete(o.live, k)
			}
		}
		l = &liveOutput{}
		o.live[key] = l
	}
	l.next++
	c.ID, c.Data = strconv.FormatInt(l.next, 10), slices.Clone(c.Data)
	l.chunks = append(l.chunks, c)
	if n := len(l.chunks) - ledger.MaxLiveChunks; n > 0 {
		l.chunks = slices.Delete(l.chunks, 0, n)
	}
	l.until = now.Add(ttl)
	close(o.changed)
	o.changed = make(chan struct{})
	return nil
}

// FollowOutput returns the chunks after after, waiting up to block for one.
func (o *Output) FollowOutput(ctx context.Context, job, occ, after string, block time.Duration) ([]ledger.OutputChunk, error) {
	seen, _ := strconv.ParseInt(after, 10, 64)
	t := time.NewTimer(block)
	defer t.Stop()
	for {
		out, changed := o.chunksAfter(job+"\x00"+occ, seen)
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-changed:
		case <-t.C:
			return nil, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// chunksAfter returns copies of the live chunks of key after seen (at most
// ledger.FollowBatch), and the channel the next publish closes.
func (o *Output) chunksAfter(key string, seen int64) ([]ledger.OutputChunk, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	l := o.live[key]
	if l == nil || !time.Now().Before(l.until) {
		return nil, o.changed
	}
	var out []ledger.OutputChunk
	for _, c := range l.chunks {
		if id, _ := strconv.ParseInt(c.ID, 10, 64); id > seen && len(out) < ledger.FollowBatch {
			out = append(out, c) // Data is never modified once published
		}
	}
	return out, o.changed
}

// StoreHookResult appends r to the occurrence's hook results (at most
// ledger.MaxHookResults, the newest) and keeps them for keep's age; at
// most keep.Max occurrences per job keep results, the first to expire
// goes first.
func (o *Output) StoreHookResult(ctx context.Context, job, occ string, r ledger.HookResult, keep ledger.Retention) error {
	ttl, maxN := keep.Resolved()
	if err := ctx.Err(); err != nil {
		return err
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	m := entries(o.hooks, job)
	k := m[occ]
	if !now.Before(k.until) {
		k.results = nil
	}
	k.results = append(k.results, r)
	if n := len(k.results); n > ledger.MaxHookResults {
		k.results = slices.Clone(k.results[n-ledger.MaxHookResults:])
	}
	k.until = now.Add(ttl)
	m[occ] = k
	bound(m, maxN, func(k keptHooks) time.Time { return k.until })
	return nil
}

// HookResults returns a copy of the occurrence's kept hook results.
func (o *Output) HookResults(ctx context.Context, job, occ string) ([]ledger.HookResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	k, ok := o.hooks[job][occ]
	if !ok || !time.Now().Before(k.until) {
		return nil, nil
	}
	return slices.Clone(k.results), nil
}

// entries returns job's map in m, made when it has none.
func entries[V any](m map[string]map[string]V, job string) map[string]V {
	e := m[job]
	if e == nil {
		e = map[string]V{}
		m[job] = e
	}
	return e
}

// bound deletes from m, one job's entries by occurrence id, the ones that
// expire first until at most maxN are left.
func bound[V any](m map[string]V, maxN int, until func(V) time.Time) {
	for len(m) > maxN {
		first := ""
		for id, v := range m {
			if first == "" || until(v).Before(until(m[first])) {
				first = id
			}
		}
		delete(m, first)
	}
}
