//go:build bench

package bench

import (
	"bufio"
	"net"
	"strings"
	"testing"
	"time"
)

// monitor is a MONITOR connection to a redis-server that collects every
// line the server sends until stop.
type monitor struct {
	conn  net.Conn
	done  chan struct{}
	lines []string
}

// startMonitor opens the connection and waits for MONITOR's +OK.
func startMonitor(t *testing.T, addr string) *monitor {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("monitor: %v", err)
	}
	r := bufio.NewReaderSize(conn, 1<<16)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatalf("monitor: %v", err)
	}
	if l, err := r.ReadString('\n'); err != nil || strings.TrimSpace(l) != "+OK" {
		t.Fatalf("monitor: got %q, %v, want +OK", l, err)
	}
	_ = conn.SetDeadline(time.Time{})
	m := &monitor{conn: conn, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return // the connection was closed by stop
			}
			if s, ok := strings.CutPrefix(strings.TrimRight(l, "\r\n"), "+"); ok {
				m.lines = append(m.lines, s)
			}
		}
	}()
	t.Cleanup(func() { m.conn.Close(); <-m.done })
	return m
}

// stop closes the connection, waits for the reader and returns the
// top-level commands (lines from "lua", commands called inside scripts,
// are dropped).
func (m *monitor) stop(t *testing.T) []MonitorCommand {
	t.Helper()
	time.Sleep(50 * time.Millisecond) // let the last lines arrive
	m.conn.Close()
	<-m.done
	var out []MonitorCommand
	for _, l := range m.lines {
		c, err := ParseMonitorLine(l)
		if err != nil {
			t.Fatal(err)
		}
		if c.Client != "lua" {
			out = append(out, c)
		}
	}
	return out
}
