package actors

import (
	"strings"
	"testing"
)

// The queue between a run's readers and its publisher never blocks: what
// does not fit is dropped whole and counted, and Take (at the end) empties
// it.
func TestOutQueue_DropsAndCounts(t *testing.T) {
	q := newOutQueue(10)
	q.Add([]byte("abcd"), false) // 5
	q.Add([]byte("efgh"), true)  // 4: 9
	q.Add([]byte("ij"), false)   // 3: dropped
	q.Add([]byte("k"), true)     // 1: 10
	data, dropped := q.Take(true)
	if string(data) != "abcd\nefghk" || dropped != 3 {
		t.Errorf("got %q, dropped %d; want %q, 3", data, dropped, "abcd\nefghk")
	}
	if data, dropped := q.Take(true); len(data) != 0 || dropped != 0 {
		t.Errorf("after Take: got %q, dropped %d; want empty", data, dropped)
	}
	q.Add([]byte(strings.Repeat("x", 11)), false)
	if data, dropped := q.Take(true); len(data) != 0 || dropped != 12 {
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

// Take keeps an unfinished line for the next Take, once: the readers show
// each chunk ending with a line end, so a line cut at a chunk would show
// as two lines.
func TestOutQueue_KeepsAnUnfinishedLineOnce(t *testing.T) {
	q := newOutQueue(maxQueued)
	take := func(end bool) string { data, _ := q.Take(end); return string(data) }
	q.Add([]byte("one"), false)
	q.Add([]byte("tw"), true)
	if got := take(false); got != "one\n" {
		t.Errorf("a line being written: got %q, want %q (the rest kept)", got, "one\n")
	}
	q.Add([]byte("o"), false)
	q.Add([]byte("thr"), true)
	if got := take(false); got != "two\n" {
		t.Errorf("the kept line ended: got %q, want %q", got, "two\n")
	}
	q.Add([]byte("ee"), true)
	if got := take(false); got != "three" {
		t.Errorf("no line ended since the last Take kept one: got %q, want %q (all)", got, "three")
	}
	q.Add([]byte("10%\r20%\r3"), true)
	if got := take(false); got != "10%\r20%\r" {
		t.Errorf("a progress bar: got %q, want %q (a carriage return ends a line)", got, "10%\r20%\r")
	}
	q.Add([]byte("0%\r"), true)
	if got := take(false); got != "30%\r" {
		t.Errorf("the kept piece with the next: got %q, want %q", got, "30%\r")
	}
	q.Add([]byte("a\r"), true)
	if got := take(false); got != "" {
		t.Errorf("a carriage return at the end (maybe the start of \\r\\n): got %q, want it kept", got)
	}
	q.Add([]byte(""), false)
	if got := take(false); got != "a\r\n" {
		t.Errorf("got %q, want %q", got, "a\r\n")
	}
	q.Add([]byte("last"), true)
	if got := take(true); got != "last" {
		t.Errorf("the end: got %q, want %q (all)", got, "last")
	}
	long := strings.Repeat("x", flushBytes)
	q.Add([]byte("b\n"+long), true)
	if got := take(false); got != "b\n"+long {
		t.Errorf("an unfinished line of flushBytes: got %d bytes, want all %d", len(got), len(long)+2)
	}
}
