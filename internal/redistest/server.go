// Package redistest starts real redis-server processes and a fault-injecting
// TCP proxy for tests (the Redis protocol is tested against real
// servers on free loopback ports, no build tag).
//
// Everything here is for tests only and reports failures through testing.TB.
package redistest

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// installHint is the one-line message when redis-server is missing.
const installHint = "redis-server not found on PATH: install Redis 7 (apt-get install redis-server, brew install redis) to run these tests"

// readyTimeout bounds how long Start and Restart wait for PING to answer.
const readyTimeout = 10 * time.Second

// Server is a real redis-server process listening on 127.0.0.1 on a free
// port, without persistence (--save "" --appendonly no, unless StartWith
// arguments say otherwise), in its own temporary directory. Stop, Kill and
// Restart therefore lose all data.
//
// Methods must be called from the test goroutine (or be serialised by the
// caller); they block until the process has reached the requested state.
type Server struct {
	t    testing.TB
	bin  string
	dir  string
	port int
	args []string // extra server arguments (StartWith), kept across Restart
	// bus is the Cluster bus port (--cluster-port) of a Cluster node, 0
	// otherwise; chosen free, since the default port+10000 may not exist.
	bus int
	// sentinel is the config file of a sentinel (StartSentinels): the
	// process runs `redis-server FILE --sentinel`.
	sentinel string
	// tls is the client configuration of a TLS-only server (StartTLS):
	// the readiness check and Do connect with it.
	tls *tls.Config

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has been waited for
}

// Start launches redis-server on a free loopback port and waits until it
// answers PING. It fails the test with an install hint if redis-server is not
// on PATH (it never skips). A t.Cleanup kills the process.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartWith(t)
}

// StartWith is Start with extra redis-server command-line arguments, given
// after the defaults so that they win: e.g. "--maxmemory", "2mb",
// "--maxmemory-policy", "allkeys-lru", or "--rename-command", "EVALSHA", ""
// (an empty argument is passed as such). Restart keeps them. A server that
// exits at once (an invalid argument) fails the test with its output.
func StartWith(t testing.TB, args ...string) *Server {
	t.Helper()
	return start(t, false, args)
}

// start starts a server; a Cluster node (bus) also gets a free bus port.
func start(t testing.TB, bus bool, args []string) *Server {
	t.Helper()
	bin, err := findServer()
	if err != nil {
		t.Fatalf("%s", installHint)
	}
	s := &Server{t: t, bin: bin, dir: t.TempDir(), args: args}
	if bus {
		s.bus = freePort(t)
	}
	t.Cleanup(s.Kill)
	// A free port can be taken by someone else between probing and binding:
	// retry with a new port a few times.
	for attempt := 0; ; attempt++ {
		s.port = freePort(t)
		err := s.launch()
		if err == nil {
			return s
		}
		if attempt == 4 {
			t.Fatalf("redistest: start redis-server: %v", err)
		}
	}
}

// findServer finds the redis-server binary on PATH.
func findServer() (string, error) { return exec.LookPath("redis-server") }

// Addr returns "127.0.0.1:PORT". The port stays the same across Restart.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// Stop sends SIGTERM (and SIGCONT, in case the server is paused) and waits for
// the process to exit. Data is lost: there is no persistence.
func (s *Server) Stop() { s.signalAndWait(syscall.SIGTERM) }

// Kill sends SIGKILL and waits for the process to exit. It is a no-op if the
// server is not running.
func (s *Server) Kill() { s.signalAndWait(syscall.SIGKILL) }

// Restart starts a stopped or killed server again on the same port (retrying
// briefly while the old socket is still in use) and waits for PING. A running
// server is killed first. The new server is empty and has no scripts loaded.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	for attempt := 0; attempt < 20; attempt++ {
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond) // port still in TIME_WAIT/bound: back off
	}
	s.t.Fatalf("redistest: restart redis-server on %s: %v", s.Addr(), err)
}

// Pause sends SIGSTOP: the server keeps its connections open but answers
// nothing (a hung Redis) until Resume.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT to a paused server.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.t.Errorf("redistest: signal %v: server not running", sig)
		return
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Errorf("redistest: signal %v: %v", sig, err)
	}
}

func (s *Server) signalAndWait(sig syscall.Signal) {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd, s.done = nil, nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(sig)
	_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process handles SIGTERM only once continued
	<-done
}

// launch starts the process on s.port and waits for PING. On failure the
// process is gone when it returns.
func (s *Server) launch() error {
	var args []string
	switch {
	case s.sentinel != "":
		args = []string{s.sentinel, "--sentinel", "--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
			"--dir", s.dir, "--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning", "--logfile", ""}
	case s.tls != nil:
		args = []string{"--port", "0", "--tls-port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", s.dir,
			"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning", "--logfile", ""}
	default:
		args = []string{"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", s.dir,
			"--protected-mode", "no", "--daemonize", "no", "--loglevel", "warning", "--logfile", ""}
	}
	args = append(args, s.args...)
	if s.bus != 0 {
		args = append(args, "--cluster-port", strconv.Itoa(s.bus))
	}
	cmd := exec.Command(s.bin, args...)
	out := &syncWriter{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }() // ends when the process exits
	if err := waitReady(s.dial, s.Addr(), done); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("%w; output: %s", err, strings.TrimSpace(out.String()))
	}
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	return nil
}

// dial connects to the server: TCP, or TLS with s.tls for a TLS server.
func (s *Server) dial(addr string, timeout time.Duration) (net.Conn, error) {
	if s.tls == nil {
		return net.DialTimeout("tcp", addr, timeout)
	}
	return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, s.tls)
}

// waitReady polls PING until +PONG, the process exits, or readyTimeout.
func waitReady(dial dialFunc, addr string, exited <-chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		select {
		case <-exited:
			return errors.New("redis-server exited before answering PING")
		default:
		}
		if err := ping(dial, addr, time.Second); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("no PONG within %v: %w", readyTimeout, err)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronisation
	}
}

// dialFunc connects to addr within timeout.
type dialFunc func(addr string, timeout time.Duration) (net.Conn, error)

func tcpDial(addr string, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, timeout)
}

// Ping sends an inline PING to addr and expects +PONG within timeout.
func Ping(addr string, timeout time.Duration) error { return ping(tcpDial, addr, timeout) }

func ping(dial dialFunc, addr string, timeout time.Duration) error {
	c, err := dial(addr, timeout)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("unexpected reply %q", line)
	}
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: find free port: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// syncWriter collects the process's stdout and stderr (first 64 KiB) for
// error messages; exec copies both streams concurrently.
type syncWriter struct {
	mu sync.Mutex
	w  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.w.Len() < 64<<10 {
		w.w.Write(p)
	}
	return len(p), nil
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.String()
}
