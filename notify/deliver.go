package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/cronlock/cronlock/config"
)

// Policy bounds the delivery of one event to one receiver: at most
// Attempts POSTs, each bounded by Timeout, spaced by an exponential backoff
// with jitter (Base, doubling up to Max, each wait drawn from [d/2, d)),
// and no new attempt once Total has passed since the first.
type Policy struct {
	Attempts int
	Timeout  time.Duration
	Base     time.Duration
	Max      time.Duration
	Total    time.Duration
}

// DefaultPolicy is the daemon's: 6 attempts over at most 2 minutes.
var DefaultPolicy = Policy{Attempts: 6, Timeout: 10 * time.Second, Base: time.Second, Max: 30 * time.Second, Total: 2 * time.Minute}

// Receiver is one webhook, ready to send: its secret read.
type Receiver struct {
	URL    string
	Events []string
	Format string
	Secret []byte // nil: requests are not signed
}

// NewReceiver reads w's secret file (config.ReadSecret). The error names
// the file, never its content.
func NewReceiver(w config.Webhook) (Receiver, error) {
	r := Receiver{URL: w.URL, Events: w.Events, Format: w.Format}
	if w.SecretFile != "" {
		sec, err := config.ReadSecret(w.SecretFile)
		if err != nil {
			return r, fmt.Errorf("webhook %s: secret_file: %w", Redact(w.URL), err)
		}
		r.Secret = sec
	}
	return r, nil
}

// Wants reports whether r receives events of kind.
func (r Receiver) Wants(kind string) bool { return slices.Contains(r.Events, kind) }

// Redact returns u fit for logs: without user info, query and fragment;
// for anything that does not parse, "(unparsable url)". A URL whose path
// is its token (Slack's) should be named by its host only: RedactHost.
func Redact(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable url)"
	}
	p.User, p.RawQuery, p.Fragment, p.RawFragment, p.ForceQuery = nil, "", "", "", false
	return p.String()
}

// RedactHost returns u's scheme and host only.
func RedactHost(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "(unparsable url)"
	}
	return p.Scheme + "://" + p.Host
}

// Name is how logs and `cronlock notify test` name r: Redact, or
// RedactHost for the slack format (whose URL path is a token).
func (r Receiver) Name() string {
	if r.Format == config.FormatSlack {
		return RedactHost(r.URL)
	}
	return Redact(r.URL)
}

// NewClient returns the HTTP client alerts are sent with: it does not
// follow redirects (a POST redirected would turn into a GET, and a 3xx is
// reported as a refusal instead).
func NewClient() *http.Client {
	return &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// permanentError is a response that a retry would not change (a 3xx, or
// a 4xx other than 408 and 429).
type permanentError struct{ status int }

func (e permanentError) Error() string { return "the receiver answered " + strconv.Itoa(e.status) }

// Post sends body for e once: one POST bounded by timeout, signed when r
// has a secret. A 2xx answer is success; anything else an error.
func (r Receiver) Post(ctx context.Context, client *http.Client, kind string, body []byte, now time.Time, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.URL, bytes.NewReader(body))
	if err != nil {
		return errors.New("bad url") // the error would quote the URL
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "cronlock")
	req.Header.Set(HeaderEvent, kind)
	if r.Secret != nil {
		ts := strconv.FormatInt(now.Unix(), 10)
		req.Header.Set(HeaderTimestamp, ts)
		req.Header.Set(HeaderSignature, Sign(r.Secret, ts, body))
	}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which may hold a token
		}
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return nil
	case s >= 300 && s < 500 && s != http.StatusRequestTimeout && s != http.StatusTooManyRequests:
		return permanentError{s}
	default:
		return fmt.Errorf("the receiver answered %d", s)
	}
}

// Deliver sends e to r under policy p: it retries a failed POST (not a
// permanent refusal) until one succeeds, the attempts or the total time
// are used up, or ctx ends (shutdown). It returns the number of attempts
// made and nil, or the last error.
func (r Receiver) Deliver(ctx context.Context, client *http.Client, e Event, p Policy) (int, error) {
	body := Body(e, r.Format)
	start := time.Now()
	wait := p.Base
	for attempt := 1; ; attempt++ {
		err := r.Post(ctx, client, e.Kind, body, time.Now(), p.Timeout)
		var perm permanentError
		switch {
		case err == nil:
			return attempt, nil
		case errors.As(err, &perm), attempt >= p.Attempts, ctx.Err() != nil:
			return attempt, err
		}
		d := jitter(wait)
		if time.Since(start)+d > p.Total {
			return attempt, fmt.Errorf("%w (gave up: the next attempt would pass the %s bound)", err, p.Total)
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return attempt, fmt.Errorf("%w (gave up: shutting down)", err)
		case <-t.C:
		}
		wait = min(wait*2, p.Max)
	}
}

// jitter draws a wait from [d/2, d).
func jitter(d time.Duration) time.Duration {
	if d <= 1 {
		return d
	}
	return d/2 + rand.N(d/2)
}
