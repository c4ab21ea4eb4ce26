package redislock

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"strings"
	"time"
)

// TLSProblem is a connection failure explained: what went wrong with TLS
// between the client and the server, and the fix (docs/protocol.md,
// "Redis calls").
type TLSProblem struct {
	Short string // a few words for a state line, e.g. "server certificate from an unknown authority"
	Fix   string // what to change
	Err   error  // the connection error
}

func (p *TLSProblem) Error() string {
	return "tls: " + p.Short + ": " + p.Fix + " (" + p.Err.Error() + ")"
}
func (p *TLSProblem) Unwrap() error { return p.Err }

// ExplainTLS returns a *TLSProblem when err, a failed call to the server at
// addr, has a TLS cause, and nil otherwise. cfg is the client's TLS
// configuration (nil: TLS off). Certificate errors and TLS alerts are read
// from err first. Then, unless timeout is 0, one more connection to addr
// (bounded by timeout) looks for the cause, since a client that retries
// until its deadline reports the deadline, not the cause: with TLS on, a
// handshake with cfg and a PING (a certificate error or alert names the
// cause; a server that answers a plaintext PING instead is a plaintext
// port); with TLS off, a TLS handshake (a server that completes it speaks
// TLS only; the failure may be a reset, EOF or the client's deadline). It blocks for at most about 2 × timeout; call it when a
// failure is seen, not on every call.
func ExplainTLS(ctx context.Context, err error, addr string, cfg *tls.Config, timeout time.Duration) *TLSProblem {
	if err == nil {
		return nil
	}
	if p := certProblem(err); p != nil || timeout <= 0 {
		return p
	}
	if cfg == nil {
		// A TLS-only server resets a plaintext client (or closes: EOF), or,
		// on a loaded host, the client's deadline passes first: a handshake
		// (bounded by timeout) tells a TLS-only server from a hung one.
		if speaksTLS(ctx, addr, timeout) {
			return &TLSProblem{Short: "plaintext to a TLS port", Err: err,
				Fix: "the server at " + addr + " speaks TLS: set redis.tls.enabled: true (with redis.tls.ca_file)"}
		}
		return nil
	}
	var ne net.Error
	herr := pingTLS(ctx, addr, cfg, timeout)
	if p := certProblem(herr); p != nil {
		p.Err = err
		return p
	}
	if errors.As(herr, &ne) && ne.Timeout() && answersPlaintext(ctx, addr, timeout) {
		return &TLSProblem{Short: "TLS handshake to a plaintext port", Err: err,
			Fix: "the server at " + addr + " answers without TLS: give its TLS port (tls-port), or set redis.tls.enabled: false"}
	}
	return nil
}

// certProblem explains a certificate error or a TLS alert in err.
func certProblem(err error) *TLSProblem {
	if err == nil {
		return nil
	}
	var unknown x509.UnknownAuthorityError
	var host x509.HostnameError
	var invalid x509.CertificateInvalidError
	// A TLS alert from the server has an unexported type in crypto/tls
	// (tls.AlertError is QUIC's): its text, "remote error: tls: " and the
	// alert's RFC 8446 name, is what can be read.
	remote := func(names ...string) bool {
		for _, n := range names {
			if strings.Contains(err.Error(), "remote error: tls: "+n) {
				return true
			}
		}
		return false
	}
	switch {
	case errors.As(err, &unknown):
		return &TLSProblem{Short: "server certificate from an unknown authority", Err: err,
			Fix: "give the CA that signed the server's certificate in redis.tls.ca_file (insecure_skip_verify: true skips the check, for tests only)"}
	case errors.As(err, &host):
		return &TLSProblem{Short: "server certificate for another name", Err: err,
			Fix: "set redis.tls.server_name to a name the server's certificate holds (" + strings.Join(host.Certificate.DNSNames, ", ") + ")"}
	case errors.As(err, &invalid):
		return &TLSProblem{Short: "server certificate not valid", Err: err, Fix: "renew the server's certificate (expired, or not for servers)"}
	case remote("certificate required", "bad certificate"):
		return &TLSProblem{Short: "the server requires a client certificate", Err: err,
			Fix: "set redis.tls.cert_file and redis.tls.key_file to a certificate signed by a CA the server trusts"}
	case remote("unknown certificate authority"):
		return &TLSProblem{Short: "the server does not trust the client certificate", Err: err,
			Fix: "use a client certificate (redis.tls.cert_file) signed by the CA of the server's tls-ca-cert-file"}
	}
	return nil
}

// pingTLS connects to addr with cfg, sends an inline PING and reads the
// first reply line: nil when the server answered anything over TLS.
func pingTLS(ctx context.Context, addr string, cfg *tls.Config, timeout time.Duration) error {
	c := cfg.Clone()
	if c.ServerName == "" {
		c.ServerName, _, _ = net.SplitHostPort(addr)
	}
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout}, Config: c}
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	conn, err := d.DialContext(dctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	// With TLS 1.3 a server rejects the client's certificate after the
	// client's handshake is done: listen for its alert first, since a write
	// can meet the reset that follows it.
	r := bufio.NewReader(conn)
	_ = conn.SetReadDeadline(time.Now().Add(min(timeout, 300*time.Millisecond)))
	if _, err := r.Peek(1); err != nil {
		var ne net.Error
		if !errors.As(err, &ne) || !ne.Timeout() {
			return err
		}
	}
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	_, err = r.ReadString('\n')
	return err
}

// answersPlaintext reports whether addr answers an inline PING in
// plaintext (+PONG, or an error such as -NOAUTH).
func answersPlaintext(ctx context.Context, addr string, timeout time.Duration) bool {
	d := net.Dialer{Timeout: timeout}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && (strings.HasPrefix(line, "+") || strings.HasPrefix(line, "-"))
}

// speaksTLS reports whether addr completes a TLS handshake (the
// certificate is not checked: only whether the port speaks TLS).
func speaksTLS(ctx context.Context, addr string, timeout time.Duration) bool {
	d := tls.Dialer{NetDialer: &net.Dialer{Timeout: timeout},
		Config: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}} //nolint:gosec // a probe of the protocol, no data sent
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return strings.Contains(err.Error(), "remote error: tls: ") // an alert (e.g. certificate required) is TLS too
	}
	c.Close()
	return true
}
