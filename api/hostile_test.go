package api

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cronlock/cronlock/config"
)

// The auth scheme is case-insensitive (RFC 7235 §2.1, RFC 6750 §2.1):
// "bearer TOKEN" is the right token, not a missing one.
func TestAPI_BearerSchemeCaseInsensitive(t *testing.T) {
	f := newFixture(t, []byte(testToken), config.AuthWrites)
	for _, scheme := range []string{"bearer", "BEARER", "Bearer"} {
		req := httptest.NewRequest("POST", "/api/v1/jobs/backup/resume", nil)
		req.Header.Set("Authorization", scheme+" "+testToken)
		rec := httptest.NewRecorder()
		f.h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Errorf("Authorization: %s TOKEN: got %d %s, want 200", scheme, rec.Code, rec.Body)
		}
	}
}

// A body over the limit is refused saying so (not "unexpected EOF"), and a
// body with data after its JSON object is refused rather than half read.
func TestAPI_BodyTooLargeOrTrailingDataRefused(t *testing.T) {
	f := newFixture(t, []byte(testToken), config.AuthWrites)
	big := `{"note": "` + strings.Repeat("x", maxBody) + `"}`
	code, body := f.do("POST", "/api/v1/jobs/backup/pause", testToken, big)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "larger than 64 KiB") {
		t.Errorf("body of %d bytes: got %d %s, want 400 naming the 64 KiB limit", len(big), code, body)
	}
	code, body = f.do("POST", "/api/v1/jobs/backup/pause", testToken, `{"for": "1h"}{"for": "0s"}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "after the JSON object") {
		t.Errorf("two JSON objects: got %d %s, want 400", code, body)
	}
	if st, _ := f.r.State(t.Context(), "backup"); st.Paused {
		t.Errorf("backup paused by a refused request")
	}
	code, body = f.do("POST", "/api/v1/jobs/backup/pause", testToken, `{"for": "0s"}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "for 0s") {
		t.Errorf(`{"for": "0s"}: got %d %s, want 400 naming for`, code, body)
	}
}

// The token is read at each request from Options.Token, so that a token
// rotated at reload takes effect at once: the old one is refused.
func TestAPI_RotatedTokenTakesEffect(t *testing.T) {
	f := newFixture(t, []byte(testToken), config.AuthWrites)
	tok := []byte(testToken)
	f.h = New(Options{Log: f.opts.Log, Jobs: f.opts.Jobs, Redis: f.opts.Redis, NodeID: "web1", Token: func() []byte { return tok }})
	if code, body := f.do("POST", "/api/v1/jobs/backup/resume", testToken, ""); code != http.StatusOK {
		t.Fatalf("before the rotation: got %d %s, want 200", code, body)
	}
	tok = []byte("rotated")
	if code, _ := f.do("POST", "/api/v1/jobs/backup/resume", testToken, ""); code != http.StatusUnauthorized {
		t.Errorf("old token after the rotation: got %d, want 401", code)
	}
	if code, body := f.do("POST", "/api/v1/jobs/backup/resume", "rotated", ""); code != http.StatusOK {
		t.Errorf("new token after the rotation: got %d %s, want 200", code, body)
	}
}

// A run request whose reason holds a newline is refused before anything is
// written: it would forge rows in history -events.
func TestAPI_RunReasonWithNewlineRefused(t *testing.T) {
	f := newFixture(t, []byte(testToken), config.AuthWrites)
	code, body := f.do("POST", "/api/v1/jobs/backup/run", testToken, `{"reason": "a\nb"}`)
	if code != http.StatusBadRequest || !strings.Contains(string(body), "reason: contains the control character") {
		t.Errorf("got %d %s, want 400 naming reason", code, body)
	}
}
