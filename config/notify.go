package config

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
)

// Notify configures alerts on job state change (docs/alerts.md): the
// top-level `notify:` for every job, and a job's own `notify:`, whose
// webhooks add to the top-level ones (WebhooksFor).
type Notify struct {
	Webhooks []Webhook `mapstructure:"webhooks"`
}

// Webhook is one receiver of alerts: a URL POSTed one JSON body per event.
type Webhook struct {
	// URL is an absolute http or https URL. It may hold credentials
	// (user:password@, a token in the path or query): logs show it
	// without them (package notify).
	URL string `mapstructure:"url"`
	// Events are the events sent to it, a subset of NotifyEvents; after
	// Load never empty (absent = all).
	Events []string `mapstructure:"events"`
	// SecretFile holds the HMAC-SHA256 key of the X-Cronlock-Signature
	// header (surrounding whitespace trimmed); "" = unsigned.
	SecretFile string `mapstructure:"secret_file"`
	// Format is FormatJSON (default) or FormatSlack.
	Format string `mapstructure:"format"`
}

// Alert events (docs/alerts.md).
const (
	EventFailing     = "failing"      // a job's first failure after a success (or its first result)
	EventRecovered   = "recovered"    // a job's first success after a failure
	EventMissed      = "missed"       // an occurrence the audit recorded missed
	EventRunningLong = "running_long" // a run passed the job's warn_after
)

// NotifyEvents lists every alert event, in documentation order.
var NotifyEvents = []string{EventFailing, EventRecovered, EventMissed, EventRunningLong}

// Webhook body formats.
const (
	FormatJSON  = "json"
	FormatSlack = "slack"
)

// WebhooksFor returns the webhooks that receive job's alerts: the
// top-level ones, then the job's own.
func (c *Config) WebhooksFor(job *Job) []Webhook {
	return slices.Concat(c.Notify.Webhooks, job.Notify.Webhooks)
}

// notifyKeys are the keys of `notify:` and of one webhook.
var (
	notifyKeys  = []string{"webhooks"}
	webhookKeys = []string{"url", "events", "secret_file", "format"}
)

// loadNotify decodes and checks the top-level `notify:`.
func loadNotify(cfg *Config, raw map[string]any, d *decoder) {
	if v, ok := raw["notify"]; ok && v != nil {
		cfg.Notify, _ = decodeNotify(d, "notify", v)
	}
}

// decodeNotify decodes a `notify:` mapping at path (problems are recorded
// under path + ".webhooks[i].key"); ok is false when a problem was found.
func decodeNotify(d *decoder, path string, v any) (Notify, bool) {
	var n Notify
	start := len(d.probs.list)
	m, ok := asMap(v)
	if !ok {
		d.probs.err(path, "want a mapping with webhooks: [{url: …}], got %s", describe(v))
		return n, false
	}
	d.probs.unknownKeys(path, m, notifyKeys)
	if rw, ok := m["webhooks"]; ok && rw != nil {
		list, ok := rw.([]any)
		if !ok {
			d.probs.err(path+".webhooks", "want a list of webhooks such as [{url: https://HOST/PATH}], got %s", describe(rw))
			return n, false
		}
		for i, e := range list {
			if w, ok := decodeWebhook(d, fmt.Sprintf("%s.webhooks[%d]", path, i), e); ok {
				n.Webhooks = append(n.Webhooks, w)
			}
		}
	}
	return n, !d.probs.hasErrorsSince(start)
}

// decodeWebhook decodes and checks one webhook mapping at path.
func decodeWebhook(d *decoder, path string, v any) (Webhook, bool) {
	w := Webhook{Format: FormatJSON}
	m, ok := asMap(v)
	if !ok {
		d.probs.err(path, "want a mapping with url (and optionally events, secret_file, format), got %s", describe(v))
		return w, false
	}
	d.probs.unknownKeys(path, m, webhookKeys)
	ok = true
	str := func(key string, dst *string) {
		if raw, set := m[key]; set && raw != nil {
			s, good := d.str(path+"."+key, raw)
			*dst, ok = s, ok && good
		}
	}
	str("url", &w.URL)
	str("secret_file", &w.SecretFile)
	str("format", &w.Format)
	if !checkWebhookURL(d.probs, path+".url", w.URL) {
		ok = false
	}
	if w.Format != FormatJSON && w.Format != FormatSlack {
		d.probs.err(path+".format", "unknown format %q; want %s (the default) or %s (a Slack-compatible {\"text\": …} body)",
			w.Format, FormatJSON, FormatSlack)
		ok = false
	}
	w.Events, ok = webhookEvents(d, path+".events", m["events"], ok)
	if w.SecretFile != "" {
		if _, err := ReadSecret(w.SecretFile); err != nil {
			hostProblem(d.probs, d.purpose, path+".secret_file", err.Error())
			ok = ok && d.purpose != ForStart
		}
	}
	return w, ok
}

// webhookEvents decodes a webhook's events (nil raw = every event).
func webhookEvents(d *decoder, path string, raw any, ok bool) ([]string, bool) {
	if raw == nil {
		return slices.Clone(NotifyEvents), ok
	}
	evs, good := d.strings(path, raw)
	if !good {
		return nil, false
	}
	if len(evs) == 0 {
		d.probs.err(path, "empty list; omit events to send every event (%s)", strings.Join(NotifyEvents, ", "))
		return nil, false
	}
	for i, e := range evs {
		if !slices.Contains(NotifyEvents, e) {
			d.probs.err(fmt.Sprintf("%s[%d]", path, i), "unknown event %q; want one of %s", e, strings.Join(NotifyEvents, ", "))
			ok = false
		}
	}
	return evs, ok
}

// checkWebhookURL reports a URL that is not an absolute http(s) URL with
// a host. The URL itself is not echoed: it may hold a token.
func checkWebhookURL(p *problems, path, s string) bool {
	if strings.TrimSpace(s) == "" {
		p.err(path, "missing url; give the receiver's http or https URL, e.g. https://HOST/PATH")
		return false
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		p.err(path, "not a URL (%s); write e.g. https://HOST/PATH", redactURLError(err))
	case u.Scheme != "http" && u.Scheme != "https":
		p.err(path, "scheme %q is not http or https; write e.g. https://HOST/PATH", u.Scheme)
	case u.Host == "":
		p.err(path, "no host; write an absolute URL such as https://HOST/PATH")
	default:
		return true
	}
	return false
}

// redactURLError is a url.Parse error without the URL it quotes.
func redactURLError(err error) string {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err.Error()
	}
	return "unparsable"
}

// ReadSecret returns the webhook secret in file, surrounding whitespace
// trimmed. A file that cannot be read or holds nothing is an error whose
// text names the file and the fix, never its content.
func ReadSecret(file string) ([]byte, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, errors.New(fileError(file, err) + "; create it, readable by the daemon's user, or remove secret_file")
	}
	if sec := bytes.TrimSpace(data); len(sec) > 0 {
		return sec, nil
	}
	return nil, fmt.Errorf("file %q holds no secret; write one (e.g. head -c 32 /dev/urandom | base64 > %s)", file, file)
}

// hasErrorsSince reports whether a finding from index start on is an
// error.
func (p *problems) hasErrorsSince(start int) bool {
	return slices.ContainsFunc(p.list[start:], func(q Problem) bool { return !q.Warning })
}
