package actors

import (
	"strings"
	"testing"
)

// The queue between a run's readers and its publisher never blocks: what
// does not fit is dropped whole and counted, and Take empties it.
func TestOutQueue_DropsAndCounts(t *testing.T) {
	q := newOutQueue(10)
	q.Add([]byte("abcd"), false) // 5
	q.Add([]byte("efgh"), true)  // 4: 9
	q.Add([]byte("ij"), false)   // 3: dropped
	q.Add([]byte("k"), true)     // 1: 10
	data, dropped := q.Take()
	if string(data) != "abcd\nefghk" || dropped != 3 {
		t.Errorf("got %q, dropped %d; want %q, 3", data, dropped, "abcd\nefghk")
	}
	if data, dropped := q.Take(); len(data) != 0 || dropped != 0 {
		t.Errorf("after Take: got %q, dropped %d; want empty", data, dropped)
	}
	q.Add([]byte(strings.Repeat("x", 11)), false)
	if data, dropped := q.Take(); len(data) != 0 || dropped != 12 {
		t.Errorf("a line over the bound: got %q, dropped %d; want none, 12", data, dropped)
	}
}

// A full queue wakes the publisher once, without blocking the reader.
func TestOutQueue_WakesAtFlushBytes(t *testing.T) {
	q := newOutQueue(maxQueued)
	line := []byte(strings.Repeat("y", 1023))
	for range 2 * flushBytes / 1024 {
		q.Add(line, false)
	}
	select {
	case <-q.wake:
	default:
		t.Fatal("no wake after flushBytes queued")
	}
	select {
	case <-q.wake:
		t.Fatal("a second wake queued; want at most one pending")
	default:
	}
}
