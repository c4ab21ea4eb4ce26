package redistest

import (
	"net"
	"sync"
	"testing"
)

// Proxy is an in-test TCP proxy between one client and a Redis server, used to
// cut that client off (a network partition) without touching the server or
// other clients.
//
// While cut, the proxy keeps reading from both sides and drops the bytes:
// connections stay open, so clients see timeouts, not resets. All goroutines
// end at test cleanup.
type Proxy struct {
	t      testing.TB
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex
	cut    bool
	closed bool
	pipes  map[*pipe]struct{}
}

// pipe is one proxied client connection and, unless it was accepted while
// cut, its upstream connection.
type pipe struct {
	client, upstream net.Conn // upstream is nil for a connection blackholed from the start
	cut              bool     // guarded by Proxy.mu
}

// NewProxy listens on a free loopback port and forwards each accepted
// connection to target. A t.Cleanup closes the listener and every connection
// and waits for all proxy goroutines.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: proxy listen: %v", err)
	}
	p := &Proxy{t: t, target: target, ln: ln, pipes: make(map[*pipe]struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// Addr returns the proxy's "127.0.0.1:PORT"; point the client under test here.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Cut starts a partition: existing connections stop forwarding in both
// directions (bytes are read and dropped, sockets stay open) and new
// connections are accepted but blackholed too. It does not block.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for pp := range p.pipes {
		pp.cut = true
	}
}

// Restore ends a partition: the blackholed connections are closed (clients
// see them fail and reconnect) and new connections are forwarded again.
func (p *Proxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for pp := range p.pipes {
		if pp.cut {
			pp.closeConns()
			delete(p.pipes, pp)
		}
	}
}

func (p *Proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for pp := range p.pipes {
		pp.closeConns()
		delete(p.pipes, pp)
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return // listener closed
		}
		p.serve(c)
	}
}

// serve registers a new client connection and starts its copy goroutines.
func (p *Proxy) serve(c net.Conn) {
	p.mu.Lock()
	cut := p.cut
	p.mu.Unlock()
	pp := &pipe{client: c, cut: cut}
	if !cut {
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close() // target down: behave like it
			return
		}
		pp.upstream = up
	}
	p.mu.Lock()
	// Cut or Restore may have run since cut was read: a blackholed pipe
	// accepted before a Restore would stay blackholed forever, so it is
	// closed (the client reconnects); a forwarding pipe accepted before a
	// Cut is registered cut.
	if p.closed || (pp.upstream == nil && !p.cut) {
		p.mu.Unlock()
		pp.closeConns()
		return
	}
	pp.cut = p.cut
	p.pipes[pp] = struct{}{}
	p.wg.Add(1)
	go p.copy(pp, pp.client, pp.upstream)
	if pp.upstream != nil {
		p.wg.Add(1)
		go p.copy(pp, pp.upstream, pp.client)
	}
	p.mu.Unlock()
}

// copy forwards src to dst until either side fails, dropping bytes while the
// pipe is cut. dst may be nil (blackholed from the start).
func (p *Proxy) copy(pp *pipe, src, dst net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			drop := pp.cut || dst == nil
			p.mu.Unlock()
			if !drop {
				if _, werr := dst.Write(buf[:n]); werr != nil {
					err = werr
				}
			}
		}
		if err != nil {
			p.mu.Lock()
			if !pp.cut {
				// Normal end: close both sides. A cut pipe stays open (the
				// partition hides a hang-up) until Restore or cleanup.
				pp.closeConns()
				delete(p.pipes, pp)
			}
			p.mu.Unlock()
			return
		}
	}
}

func (pp *pipe) closeConns() {
	_ = pp.client.Close()
	if pp.upstream != nil {
		_ = pp.upstream.Close()
	}
}
