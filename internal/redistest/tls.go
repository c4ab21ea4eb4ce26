package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TLSFiles are the PEM files of a test PKI made by StartTLS: a CA, the
// server's certificate and key (for 127.0.0.1 and localhost), a client
// certificate and key signed by the same CA (mTLS), and a second CA that
// signed nothing (for "unknown authority" tests).
type TLSFiles struct {
	CA, ServerCert, ServerKey, ClientCert, ClientKey, OtherCA string
}

// TLSServer is a redis-server that listens with TLS only (--port 0).
type TLSServer struct {
	*Server
	Files TLSFiles
}

// StartTLS generates a PKI with crypto/x509 (ECDSA P-256, valid for an
// hour; no openssl needed) in a temporary directory and starts a
// redis-server on a free loopback port that speaks TLS only, with it.
// clientCerts true requires client certificates signed by the CA
// (--tls-auth-clients yes, mTLS); false accepts clients without one
// (--tls-auth-clients no). args are added as for StartWith. A cleanup
// kills the process.
func StartTLS(t testing.TB, clientCerts bool, args ...string) *TLSServer {
	t.Helper()
	files := writePKI(t, t.TempDir())
	auth := "no"
	if clientCerts {
		auth = "yes"
	}
	bin, err := findServer()
	if err != nil {
		t.Fatalf("%s", installHint)
	}
	pair, err := tls.LoadX509KeyPair(files.ClientCert, files.ClientKey)
	if err != nil {
		t.Fatalf("redistest: client key pair: %v", err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(mustRead(t, files.CA))
	srv := &Server{t: t, bin: bin, dir: t.TempDir(),
		tls: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{pair}, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12},
		args: append([]string{"--tls-cert-file", files.ServerCert, "--tls-key-file", files.ServerKey,
			"--tls-ca-cert-file", files.CA, "--tls-auth-clients", auth}, args...)}
	return &TLSServer{Server: launchNew(t, srv), Files: files}
}

// writePKI writes the TLSFiles into dir.
func writePKI(t testing.TB, dir string) TLSFiles {
	t.Helper()
	f := TLSFiles{CA: filepath.Join(dir, "ca.pem"), ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey: filepath.Join(dir, "server-key.pem"), ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey: filepath.Join(dir, "client-key.pem"), OtherCA: filepath.Join(dir, "other-ca.pem")}
	ca, caKey := newCert(t, "cronlock test CA", nil, nil, func(c *x509.Certificate) {
		c.IsCA, c.BasicConstraintsValid = true, true
		c.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	})
	writePEM(t, f.CA, "CERTIFICATE", ca.Raw)
	other, _ := newCert(t, "cronlock other CA", nil, nil, func(c *x509.Certificate) {
		c.IsCA, c.BasicConstraintsValid = true, true
		c.KeyUsage = x509.KeyUsageCertSign
	})
	writePEM(t, f.OtherCA, "CERTIFICATE", other.Raw)
	srv, srvKey := newCert(t, "redis test server", ca, caKey, func(c *x509.Certificate) {
		c.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		c.DNSNames = []string{"localhost"}
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		c.KeyUsage = x509.KeyUsageDigitalSignature
	})
	writePEM(t, f.ServerCert, "CERTIFICATE", srv.Raw)
	writeKey(t, f.ServerKey, srvKey)
	cli, cliKey := newCert(t, "cronlock test client", ca, caKey, func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
		c.KeyUsage = x509.KeyUsageDigitalSignature
	})
	writePEM(t, f.ClientCert, "CERTIFICATE", cli.Raw)
	writeKey(t, f.ClientKey, cliKey)
	return f
}

// newCert makes a certificate for cn, signed by parent (self-signed when
// parent is nil), adjusted by edit.
func newCert(t testing.TB, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey,
	edit func(*x509.Certificate)) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("redistest: key: %v", err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatalf("redistest: serial: %v", err)
	}
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour)}
	edit(tmpl)
	signer, signKey := tmpl, key
	if parent != nil {
		signer, signKey = parent, parentKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signKey)
	if err != nil {
		t.Fatalf("redistest: certificate %q: %v", cn, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("redistest: parse %q: %v", cn, err)
	}
	return cert, key
}

func writeKey(t testing.TB, path string, key *ecdsa.PrivateKey) {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("redistest: marshal key: %v", err)
	}
	writePEM(t, path, "PRIVATE KEY", der)
}

func writePEM(t testing.TB, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatalf("redistest: write %s: %v", path, err)
	}
}

func mustRead(t testing.TB, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("redistest: read %s: %v", path, err)
	}
	return b
}
