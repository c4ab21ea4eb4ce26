package redistest

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServer_Lifecycle(t *testing.T) {
	s := Start(t)
	if err := Ping(s.Addr(), time.Second); err != nil {
		t.Fatalf("ping after Start: got %v, want nil", err)
	}
	addr := s.Addr()
	s.Stop()
	if err := Ping(addr, time.Second); err == nil {
		t.Fatalf("ping after Stop: got nil, want error")
	}
	s.Restart()
	if s.Addr() != addr {
		t.Fatalf("addr after Restart: got %s, want %s", s.Addr(), addr)
	}
	if err := Ping(addr, time.Second); err != nil {
		t.Fatalf("ping after Restart: got %v, want nil", err)
	}
	s.Kill()
	s.Restart()
	if err := Ping(addr, time.Second); err != nil {
		t.Fatalf("ping after Kill+Restart: got %v, want nil", err)
	}
}

func TestServer_PauseResume(t *testing.T) {
	s := Start(t)
	s.Pause()
	if err := Ping(s.Addr(), 200*time.Millisecond); err == nil {
		t.Fatalf("ping while paused: got nil, want timeout")
	}
	s.Resume()
	if err := Ping(s.Addr(), time.Second); err != nil {
		t.Fatalf("ping after Resume: got %v, want nil", err)
	}
}

func TestServer_StopWhilePaused(t *testing.T) {
	s := Start(t)
	s.Pause()
	s.Stop() // must not hang on a stopped process
}

// pingOn sends PING on an existing connection.
func pingOn(c net.Conn, r *bufio.Reader, timeout time.Duration) error {
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	_, err := r.ReadString('\n')
	return err
}

func TestProxy_CutBlackholesAndRestoreForwards(t *testing.T) {
	s := Start(t)
	p := NewProxy(t, s.Addr())
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	if err := pingOn(c, r, time.Second); err != nil {
		t.Fatalf("ping through proxy: got %v, want nil", err)
	}

	p.Cut()
	err = pingOn(c, r, 200*time.Millisecond)
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("ping on cut connection: got %v, want a timeout (not a reset)", err)
	}
	if err := Ping(p.Addr(), 200*time.Millisecond); err == nil {
		t.Fatalf("ping on new connection while cut: got nil, want timeout")
	}

	p.Restore()
	if err := pingOn(c, r, time.Second); err == nil {
		t.Fatalf("old connection after Restore: got nil, want closed")
	}
	if err := Ping(p.Addr(), time.Second); err != nil {
		t.Fatalf("new connection after Restore: got %v, want nil", err)
	}
}

// StartWith passes its arguments to redis-server, after the defaults, and
// Restart keeps them.
func TestStartWith_ArgumentsApplyAcrossRestart(t *testing.T) {
	s := StartWith(t, "--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru", "--rename-command", "EVALSHA", "")
	for _, when := range []string{"after StartWith", "after Restart"} {
		info := s.Do("INFO", "memory")
		if !strings.Contains(info, "maxmemory:2097152\r\n") || !strings.Contains(info, "maxmemory_policy:allkeys-lru\r\n") {
			t.Errorf("%s: INFO memory lacks maxmemory:2097152 / maxmemory_policy:allkeys-lru:\n%s", when, info)
		}
		if _, err := Do(s.Addr(), time.Second, "EVALSHA", "0000000000000000000000000000000000000000", "0"); err == nil ||
			!strings.Contains(err.Error(), "unknown command") {
			t.Errorf("%s: EVALSHA: got %v, want unknown command (renamed away)", when, err)
		}
		s.Restart()
	}
}

// StartCluster builds a working 3-master cluster: every master serves its
// own slots, redirects the others (MOVED), and Owner names the right one.
func TestStartCluster_ThreeMasters(t *testing.T) {
	c := StartCluster(t, 3)
	if len(c.Addrs()) != 3 {
		t.Fatalf("Addrs: got %v, want 3", c.Addrs())
	}
	key := "{cronlock}:job:x"
	if got := c.Owner(key).Do("SET", key, "1"); got != "OK" {
		t.Fatalf("SET on the owner: got %q, want OK", got)
	}
	_, err := Do(c.NotOwner(key).Addr(), time.Second, "GET", key)
	if err == nil || !strings.Contains(err.Error(), "MOVED "+strconv.Itoa(c.Slot(key))) {
		t.Fatalf("GET on another master: got %v, want MOVED %d", err, c.Slot(key))
	}
	if info := c.Masters[0].Do("CLUSTER", "INFO"); !strings.Contains(info, "cluster_slots_assigned:16384") {
		t.Errorf("CLUSTER INFO: want every slot assigned:\n%s", info)
	}
}

// StartSentinel builds a master, a replica and three sentinels that agree
// on the master; killing the master makes them promote the replica.
func TestStartSentinel_FailoverToTheReplica(t *testing.T) {
	RequireTopologies(t)
	s := StartSentinel(t)
	if got := s.MasterAddr(); got != s.Master.Addr() {
		t.Fatalf("MasterAddr: got %s, want the master %s", got, s.Master.Addr())
	}
	s.Master.Do("SET", "k", "v")
	s.Master.Kill()
	start := time.Now()
	if got := s.WaitFailover(s.Master.Addr(), 20*time.Second); got != s.Replica.Addr() {
		t.Fatalf("after the failover: master %s, want the replica %s", got, s.Replica.Addr())
	}
	if v := s.Replica.Do("GET", "k"); v != "v" {
		t.Errorf("promoted replica: GET k = %q, want v", v)
	}
	t.Logf("failover took %v", time.Since(start).Round(10*time.Millisecond))
}

// StartTLS serves TLS only: PING over TLS with the generated CA (and, for
// mTLS, the client certificate) answers; a plaintext PING does not.
func TestStartTLS(t *testing.T) {
	for _, mtls := range []bool{false, true} {
		s := StartTLS(t, mtls)
		if v := s.Do("PING"); v != "PONG" {
			t.Errorf("mTLS %v: PING over TLS: got %q, want PONG", mtls, v)
		}
		if err := Ping(s.Addr(), time.Second); err == nil {
			t.Errorf("mTLS %v: plaintext PING answered, want a TLS-only server", mtls)
		}
	}
}

// StartClusterReplicas: every master has a replica; killing a master makes
// its replica take over its slots.
func TestStartClusterReplicas_Failover(t *testing.T) {
	RequireTopologies(t)
	c := StartClusterReplicas(t, 3, 1)
	key := "cronlock:job:{x}"
	i := c.Shard(key)
	c.Masters[i].Kill()
	start := time.Now()
	promoted := c.WaitPromoted(i, 20*time.Second)
	if promoted != c.Replicas[i][0] {
		t.Fatalf("promoted %s, want the replica of shard %d", promoted.Addr(), i)
	}
	t.Logf("cluster failover took %v", time.Since(start).Round(10*time.Millisecond))
}
