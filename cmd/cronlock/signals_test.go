package main

import (
	"os"
	"slices"
	"syscall"
	"testing"
	"time"
)

// A SIGHUP storm the daemon does not read fast enough is merged into one
// waiting SIGHUP, and the SIGTERMs after it are not lost (two kept: the
// daemon acts on the first and the second; later ones change nothing).
func TestRelaySignals_StormKeepsTheTerm(t *testing.T) {
	in := make(chan os.Signal, 32)
	out := make(chan os.Signal)
	done := make(chan struct{})
	go func() { relaySignals(in, out); close(done) }()
	for range 10 {
		in <- syscall.SIGHUP
	}
	for _, s := range []os.Signal{syscall.SIGTERM, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGTERM, syscall.SIGINT} {
		in <- s
	}
	time.Sleep(50 * time.Millisecond) // the relay has read them all, nothing sent yet
	var got []os.Signal
	for range 3 {
		select {
		case s := <-out:
			got = append(got, s)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %v, then nothing for 5 s", got)
		}
	}
	if want := []os.Signal{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGTERM}; !slices.Equal(got, want) {
		t.Fatalf("relayed %v, want %v", got, want)
	}
	select {
	case s := <-out:
		t.Fatalf("relayed %v after the merged storm, want nothing more", s)
	case <-time.After(100 * time.Millisecond):
	}
	// A SIGHUP after the waiting one was taken is a new reload.
	in <- syscall.SIGHUP
	if s := <-out; s != syscall.SIGHUP {
		t.Fatalf("relayed %v, want SIGHUP", s)
	}
	close(in)
	<-done
}
