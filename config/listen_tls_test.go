package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// wantProblems parses data and compares every problem, in order.
func wantProblems(t *testing.T, data, format string, opts Options, want ...string) {
	t.Helper()
	got := render(problemsOf(t, data, format, opts))
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestListen(t *testing.T) {
	tests := []struct{ listen, want string }{
		{"127.0.0.1:9464", ""},
		{"[::1]:9464", ""},
		{":9464", ""},
		{"localhost:http", ""}, // a service name
		{"127.0.0.1:notaport", `http.listen: "127.0.0.1:notaport": port "notaport" is neither a number 0..65535 nor a service name known to this host (/etc/services); e.g. 127.0.0.1:9464`},
		{"127.0.0.1:65536", `http.listen: "127.0.0.1:65536": port "65536" is neither a number 0..65535`},
		{"127.0.0.1:-1", `http.listen: "127.0.0.1:-1": port "-1" is neither`},
		{"9464", `http.listen: "9464" is not host:port; e.g. 127.0.0.1:9464`},
		{"127.0.0.1:0", `warning: http.listen: "127.0.0.1:0" listens on a random free port, a new one at every start; give a fixed port, e.g. 127.0.0.1:9464`},
		{"127.0.0.1:", `warning: http.listen: "127.0.0.1:" listens on a random free port`},
	}
	for _, tt := range tests {
		got := render(problemsOf(t, "http: {listen: '"+tt.listen+"'}\n"+job(""), "yaml", Options{}))
		switch {
		case tt.want == "" && len(got) > 0:
			t.Errorf("%s: got %q, want no problem", tt.listen, got)
		case tt.want != "" && (len(got) != 1 || !strings.HasPrefix(got[0], tt.want)):
			t.Errorf("%s: got %q, want one problem %q…", tt.listen, got, tt.want)
		}
	}
	if got := render(problemsOf(t, job(""), "yaml", Options{Environ: []string{"CRONLOCK_HTTP_LISTEN=h:nope"}})); len(got) != 1 ||
		!strings.HasPrefix(got[0], `http.listen (from CRONLOCK_HTTP_LISTEN): "h:nope": port "nope"`) {
		t.Errorf("from the environment: got %q", got)
	}
}

// writeKeyPair writes a self-signed certificate and its key as PEM files
// in dir and returns their paths.
func writeKeyPair(t *testing.T, dir, name string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	for path, block := range map[string]*pem.Block{cert: {Type: "CERTIFICATE", Bytes: der}, key: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key
}

// TestTLSFiles: TLS files are read and parsed as the daemon does at
// start; a problem is a warning at -validate (the files may live only on
// the target host) and an error at start.
func TestTLSFiles(t *testing.T) {
	dir := t.TempDir()
	cert, key := writeKeyPair(t, dir, "a")
	_, otherKey := writeKeyPair(t, dir, "b")
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	tlsCfg := func(enabled bool, ca, cert, key string) string {
		return "redis:\n  address: r:6379\n  tls: {enabled: " + map[bool]string{true: "true", false: "false"}[enabled] +
			", ca_file: '" + ca + "', cert_file: '" + cert + "', key_file: '" + key + "'}\n" + job("")
	}
	start, validate := Options{Purpose: ForStart}, Options{Purpose: ForValidate}
	refuse := "; the daemon will refuse to start"
	tests := []struct {
		name, data string
		opts       Options
		want       []string
	}{
		{"all good", tlsCfg(true, cert, cert, key), start, nil},
		{"missing at start", tlsCfg(true, missing, cert, key), start,
			[]string{`redis.tls.ca_file: file "` + missing + `" does not exist on this host`}},
		{"missing at validate", tlsCfg(true, missing, missing, key), validate,
			[]string{`warning: redis.tls.ca_file: file "` + missing + `" does not exist on this host` + refuse,
				`warning: redis.tls.cert_file: file "` + missing + `" does not exist on this host` + refuse}},
		{"not PEM", tlsCfg(true, garbage, "", ""), start, []string{`redis.tls.ca_file: "` + garbage + `" holds no PEM certificate`}},
		{"key does not match", tlsCfg(true, "", cert, otherKey), start,
			[]string{`redis.tls: cert_file "` + cert + `" and key_file "` + otherKey + `" are not a usable key pair: tls: private key does not match public key`}},
		{"key is a certificate", tlsCfg(true, "", cert, cert), start,
			[]string{`redis.tls: cert_file "` + cert + `" and key_file "` + cert + `" are not a usable key pair: tls: found a certificate rather than a key in the PEM for the private key`}},
		{"given but disabled", tlsCfg(false, missing, "", ""), start,
			[]string{`warning: redis.tls.ca_file: "` + missing + `" is given but redis.tls.enabled is false, so TLS is off and the file is not used; set redis.tls.enabled: true or remove it`}},
		{"memory backend", "lock: {backend: memory}\nredis: {tls: {enabled: true, ca_file: '" + missing + "'}}\n" + job(""), start, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { wantProblems(t, tt.data, "yaml", tt.opts, tt.want...) })
	}
	wantProblems(t, job(""), "yaml", Options{Purpose: ForStart, Environ: []string{"CRONLOCK_REDIS_ADDRESS=r:1",
		"CRONLOCK_REDIS_TLS_ENABLED=true", "CRONLOCK_REDIS_TLS_CA_FILE=" + missing}},
		`redis.tls.ca_file (from CRONLOCK_REDIS_TLS_CA_FILE): file "`+missing+`" does not exist on this host`)
}
