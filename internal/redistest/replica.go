package redistest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// StartReplica starts a redis-server that replicates master (--replicaof;
// args are added as for StartWith) and waits until the replication link is
// up (INFO replication: master_link_status:up); the master's
// repl-diskless-sync-delay is set to 0 so that takes milliseconds. It fails the test when that
// takes over 10 s. A cleanup kills the process; Restart keeps it a replica
// of master.
func StartReplica(t testing.TB, master *Server, args ...string) *Server {
	t.Helper()
	host, port := "127.0.0.1", strconv.Itoa(master.port)
	// The full sync starts at once, not after the default 5 s wait for
	// more replicas.
	master.Do("CONFIG", "SET", "repl-diskless-sync-delay", "0")
	r := start(t, false, append([]string{"--replicaof", host, port}, args...))
	r.WaitReplicaLinkUp(10 * time.Second)
	return r
}

// WaitReplicaLinkUp polls INFO replication until master_link_status:up,
// failing the test after timeout.
func (s *Server) WaitReplicaLinkUp(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		info, err := Do(s.Addr(), time.Second, "INFO", "replication")
		if err == nil && strings.Contains(info, "master_link_status:up") {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: replica %s: link to its master not up after %v: %v %q", s.Addr(), timeout, err, info)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not synchronisation
	}
}

// Info returns one field of INFO section (e.g. "replication", "role"),
// "" when absent. It fails the test when the server does not answer.
func (s *Server) Info(section, field string) string {
	s.t.Helper()
	for line := range strings.Lines(s.Do("INFO", section)) {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r\n"), field+":"); ok {
			return v
		}
	}
	return ""
}
