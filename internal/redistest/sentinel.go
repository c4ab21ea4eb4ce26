package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// SentinelMaster is the master set name StartSentinel monitors.
const SentinelMaster = "mymaster"

// Sentinel is a master with one replica, watched by three sentinels (quorum
// 2), all real redis-server processes on loopback. The sentinels mark the
// master down after 1 s without answers and fail over to the replica.
type Sentinel struct {
	t         testing.TB
	Master    *Server
	Replica   *Server   // Replicas[0]
	Replicas  []*Server // StartSentinelReplicas: more than one
	Sentinels []*Server
}

// StartSentinel starts the master (args are added to master and replica,
// as for StartWith), its replica (StartReplica) and three sentinels
// monitoring SentinelMaster with quorum 2, down-after-milliseconds 1000
// and failover-timeout 3000, and waits until every sentinel knows the
// master, the replica and the other two sentinels. It fails the test when
// that takes over 20 s. Cleanups kill the processes.
func StartSentinel(t testing.TB, args ...string) *Sentinel {
	t.Helper()
	return StartSentinelReplicas(t, 1, args...)
}

// StartSentinelReplicas is StartSentinel with n ≥ 1 replicas: after a
// failover the promoted replica still has n−1 replicas (the sentinels
// point them at it), which redis.min_replicas_acked needs to go on
// claiming.
func StartSentinelReplicas(t testing.TB, n int, args ...string) *Sentinel {
	t.Helper()
	s := &Sentinel{t: t, Master: StartWith(t, args...)}
	for range n {
		s.Replicas = append(s.Replicas, StartReplica(t, s.Master, args...))
	}
	s.Replica = s.Replicas[0]
	for range 3 {
		conf := filepath.Join(t.TempDir(), "sentinel.conf")
		text := fmt.Sprintf("sentinel monitor %s %s 2\n"+
			"sentinel down-after-milliseconds %[1]s 1000\n"+
			"sentinel failover-timeout %[1]s 3000\n"+
			"sentinel parallel-syncs %[1]s 1\n", SentinelMaster, strings.Replace(s.Master.Addr(), ":", " ", 1))
		if err := os.WriteFile(conf, []byte(text), 0o600); err != nil {
			t.Fatalf("redistest: write %s: %v", conf, err)
		}
		srv := &Server{t: t, dir: t.TempDir(), sentinel: conf}
		s.Sentinels = append(s.Sentinels, launchNew(t, srv))
	}
	s.waitKnown(20 * time.Second)
	return s
}

// launchNew starts srv (bin, port filled in here) like start does.
func launchNew(t testing.TB, srv *Server) *Server {
	t.Helper()
	bin, err := findServer()
	if err != nil {
		t.Fatalf("%s", installHint)
	}
	srv.bin = bin
	t.Cleanup(srv.Kill)
	for attempt := 0; ; attempt++ {
		srv.port = freePort(t)
		err := srv.launch()
		if err == nil {
			return srv
		}
		if attempt == 4 {
			t.Fatalf("redistest: start redis-server: %v", err)
		}
	}
}

// Addrs returns the sentinels' addresses (redis.addresses with
// redis.sentinel_master).
func (s *Sentinel) Addrs() []string {
	out := make([]string, len(s.Sentinels))
	for i, x := range s.Sentinels {
		out[i] = x.Addr()
	}
	return out
}

// MasterAddr asks the sentinels which address is the master now
// (SENTINEL GET-MASTER-ADDR-BY-NAME; the first that answers).
func (s *Sentinel) MasterAddr() string {
	s.t.Helper()
	for _, x := range s.Sentinels {
		if v, err := Do(x.Addr(), time.Second, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", SentinelMaster); err == nil {
			host, port, _ := strings.Cut(v, "\n")
			return host + ":" + port
		}
	}
	s.t.Fatalf("redistest: no sentinel answers")
	return ""
}

// WaitFailover waits until the sentinels name another master than old and
// that server answers as a master (INFO replication role:master) with
// every other live replica connected to it (connected_slaves). It fails
// the test after timeout, and returns the new master's address.
func (s *Sentinel) WaitFailover(old string, timeout time.Duration) string {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if addr := s.MasterAddr(); addr != old {
			want := fmt.Sprintf("connected_slaves:%d", len(s.Replicas)-1)
			if info, err := Do(addr, time.Second, "INFO", "replication"); err == nil && strings.Contains(info, "role:master") &&
				strings.Contains(info, want) {
				return addr
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: no failover from %s within %v", old, timeout)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronisation
	}
}

// waitKnown polls SENTINEL MASTER on each sentinel until it counts one
// replica per started replica and two other sentinels.
func (s *Sentinel) waitKnown(timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok := 0
		var last string
		for _, x := range s.Sentinels {
			v, err := Do(x.Addr(), time.Second, "SENTINEL", "MASTER", SentinelMaster)
			last = v
			if err == nil && field(v, "num-slaves") == strconv.Itoa(len(s.Replicas)) && field(v, "num-other-sentinels") == "2" {
				ok++
			}
		}
		if ok == len(s.Sentinels) {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("redistest: sentinels do not know the master, replica and each other after %v: %q", timeout, last)
		}
		time.Sleep(50 * time.Millisecond) // poll interval, not synchronisation
	}
}

// field returns the value after name in a flat "name\nvalue\n…" reply.
func field(reply, name string) string {
	f := strings.Split(reply, "\n")
	for i := 0; i+1 < len(f); i += 2 {
		if f[i] == name {
			return f[i+1]
		}
	}
	return ""
}

// MasterSwitch is one failover the sentinels made: At is when the watch
// first saw its configuration (within its 50 ms poll), Epoch its
// config-epoch.
type MasterSwitch struct {
	At       time.Time
	Sentinel string // the sentinel that reported it first
	Addr     string // the new master; "" until a sentinel names it
	Epoch    int
}

// MasterWatch records every failover of SentinelMaster from WatchMaster
// until the test ends: each sentinel is asked SENTINEL MASTER every 50 ms
// (all at once, 200 ms each, so one that does not answer delays nothing),
// and a config-epoch higher than any seen before is a switch (a sentinel
// that learns a failover late reports an epoch already seen, and one
// that skipped a configuration cannot invent an intermediate one). A
// loaded machine can make the sentinels judge a freshly promoted master
// down (down-after-milliseconds 1000) and fail over again; a test of a
// failover follows each switch.
type MasterWatch struct {
	mu       sync.Mutex
	switches []MasterSwitch
}

// WatchMaster starts a MasterWatch; a cleanup stops its poller.
func (s *Sentinel) WatchMaster() *MasterWatch {
	w := &MasterWatch{}
	stop, done := make(chan struct{}), make(chan struct{})
	s.t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		epoch := -1 // the highest config-epoch seen; the first poll sets it
		// before is the master of the epoch before, current that of epoch
		// ("" until a sentinel names another master than before).
		var before, current string
		type seen struct {
			sentinel, addr string
			epoch          int
		}
		for {
			answers := make(chan seen, len(s.Sentinels))
			for _, x := range s.Sentinels {
				go func() {
					v, err := Do(x.Addr(), 200*time.Millisecond, "SENTINEL", "MASTER", SentinelMaster)
					e, perr := strconv.Atoi(field(v, "config-epoch"))
					if err != nil || perr != nil {
						answers <- seen{epoch: -1}
						return
					}
					answers <- seen{sentinel: x.Addr(), addr: field(v, "ip") + ":" + field(v, "port"), epoch: e}
				}()
			}
			now := time.Now()
			all := make([]seen, 0, len(s.Sentinels))
			best := seen{epoch: -1}
			for range s.Sentinels {
				a := <-answers
				all = append(all, a)
				if a.epoch > best.epoch {
					best = a
				}
			}
			w.mu.Lock()
			switch {
			case best.epoch < 0: // no answer
			case epoch < 0:
				epoch, current = best.epoch, best.addr
			case best.epoch > epoch:
				// The leader raises the epoch once the replica it promoted
				// reports itself master, up to a second before the sentinels
				// name it (+switch-master): Addr is filled in then.
				epoch, before, current = best.epoch, current, ""
				w.switches = append(w.switches, MasterSwitch{At: now, Sentinel: best.sentinel, Epoch: best.epoch})
			}
			for _, a := range all {
				if current == "" && a.epoch == epoch && a.addr != before {
					current = a.addr
					w.switches[len(w.switches)-1].Addr = current
				}
			}
			w.mu.Unlock()
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond): // poll interval, not synchronisation
			}
		}
	}()
	return w
}

// Switches returns the switches seen so far, oldest first.
func (w *MasterWatch) Switches() []MasterSwitch {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.switches)
}

// Last returns when the last switch was seen; the zero time before any.
func (w *MasterWatch) Last() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.switches) == 0 {
		return time.Time{}
	}
	return w.switches[len(w.switches)-1].At
}
