package api

import (
	"fmt"
	"sync"
	"time"
)

// MaxFollowers bounds the live output followers one daemon serves at once
// (GET …/output?follow=1 and the dashboard's /ui/jobs/{job}/runs/{id}/live
// together). It protects the daemon's memory and its Redis connections
// from readers, who need no token under http.auth: writes: each follower
// holds a blocking Redis connection while it waits (redislock keeps at
// most 40), up to ledger.FollowBatch chunks of output per read, and what
// its connection has not taken yet. A follower beyond it is answered 429.
// Followers on the control socket (the daemon's own user and root) are not
// counted.
const MaxFollowers = 32

// MaxFollowersPerRun bounds the followers of one run (beyond: 429), so
// that the followers of one run leave room for those of others.
const MaxFollowersPerRun = 8

// FollowWriteTimeout bounds each write to a follower (a chunk and its
// flush, http.ResponseController.SetWriteDeadline): a follower whose
// connection takes nothing for that long is cut off, so a slow reader
// holds no buffers, connection or place among MaxFollowers longer.
const FollowWriteTimeout = 10 * time.Second

// Followers counts a daemon's live output followers against MaxFollowers
// and MaxFollowersPerRun. The API and the dashboard of a daemon share one
// (Options.Followers). It is safe for concurrent use and never blocks.
type Followers struct {
	max, perRun  int
	writeTimeout time.Duration

	mu    sync.Mutex
	total int
	runs  map[string]int // job + "\x00" + occurrence id → followers
}

// NewFollowers returns a count of no followers, with the limits above.
func NewFollowers() *Followers {
	return newFollowers(MaxFollowers, MaxFollowersPerRun, FollowWriteTimeout)
}

func newFollowers(max, perRun int, writeTimeout time.Duration) *Followers {
	return &Followers{max: max, perRun: perRun, writeTimeout: writeTimeout, runs: map[string]int{}}
}

// join counts a follower of job's occurrence id and returns the function
// that uncounts it (call it once), or nil and why when a limit is reached.
func (f *Followers) join(job, id string) (leave func(), why string) {
	key := job + "\x00" + id
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case f.total >= f.max:
		return nil, fmt.Sprintf("this daemon already serves %d live output followers, its most", f.max)
	case f.runs[key] >= f.perRun:
		return nil, fmt.Sprintf("job %s occurrence %s already has %d live output followers on this daemon, its most per run", job, id, f.perRun)
	}
	f.total++
	f.runs[key]++
	var once sync.Once
	return func() { once.Do(func() { f.leave(key) }) }, ""
}

func (f *Followers) leave(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.total--
	if f.runs[key]--; f.runs[key] <= 0 {
		delete(f.runs, key)
	}
}

// Count returns how many followers are counted now.
func (f *Followers) Count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total
}
