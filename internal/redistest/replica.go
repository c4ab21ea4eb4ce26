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
	master.waitReplicaOnline(r, 10*time.Second)
	master.waitReplicaStream("redistest:replica-stream", 1, 10*time.Second)
	return r
}

// waitReplicaStream writes key on the master (in a Cluster, a key of its
// own slots) and waits (WAIT, on the same connection) until n replicas
// acknowledged it, then deletes the key. After a diskless full sync,
// Redis 7 starts the replication stream to an online replica only at the
// replica's first REPLCONF ACK, which it sends once a second: until then a
// WAIT after a write returns 0 replicas.
func (s *Server) waitReplicaStream(key string, n int, timeout time.Duration) {
	s.t.Helper()
	ms := strconv.FormatInt(timeout.Milliseconds(), 10)
	replies, err := doAll(tcpDial, s.Addr(), timeout+time.Second, []string{"SET", key, "1"},
		[]string{"WAIT", strconv.Itoa(n), ms}, []string{"DEL", key})
	if err != nil || len(replies) != 3 {
		s.t.Fatalf("redistest: master %s: a write and WAIT: %q, %v", s.Addr(), replies, err)
	}
	if acked, err := strconv.Atoi(replies[1]); err != nil || acked < n {
		s.t.Fatalf("redistest: master %s: %d replicas did not acknowledge a write within %v: %q, %v", s.Addr(), n, timeout, replies, err)
	}
}

// waitReplicaOnline polls the master's INFO replication until it lists
// replica as state=online: only then does it count the replica's
// acknowledgements (WAIT). The replica's link is up before that: the
// master marks it online at its first REPLCONF ACK after the sync, up to a
// second later.
func (s *Server) waitReplicaOnline(replica *Server, timeout time.Duration) {
	s.t.Helper()
	want := "port=" + strconv.Itoa(replica.port) + ",state=online"
	deadline := time.Now().Add(timeout)
	for {
		info, err := Do(s.Addr(), time.Second, "INFO", "replication")
		if err == nil && strings.Contains(info, want) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: master %s does not list replica %s online after %v: %v %q", s.Addr(), replica.Addr(), timeout, err, info)
		}
		time.Sleep(20 * time.Millisecond) // poll interval, not synchronisation
	}
}

// WaitReplicaLinkUp polls INFO replication until master_link_status:up
// (the master may not count the replica's acknowledgements yet: see
// waitReplicaOnline),
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
