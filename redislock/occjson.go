package redislock

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cronlock/cronlock/ledger"
)

// decodeOccurrence decodes a ledger record (the JSON object of
// ledger.Occurrence), or returns err when it is not nil. The records that
// claimScript, auditScript (record()) and Finish (encoding/json) write are
// flat objects of strings and integers under the exact field names:
// scanOccurrence reads those several times faster than encoding/json,
// which reads everything else (other names, null, fractions, invalid
// UTF-8, …), so the result is always what json.Unmarshal gives. The
// overview reads some 60,000 records at 10,000 jobs (docs/dashboard.md).
func decodeOccurrence(s string, err error) (ledger.Occurrence, error) {
	if err != nil {
		return ledger.Occurrence{}, err
	}
	if o, ok := scanOccurrence(s); ok {
		return o, nil
	}
	var o ledger.Occurrence
	err = json.Unmarshal([]byte(s), &o)
	return o, err
}

// flatScanner reads one flat JSON object from s, from i on.
type flatScanner struct {
	s string
	i int
}

// scanOccurrence reads s as a flat object of ledger.Occurrence's exact
// field names with string and integer values; ok is false for anything
// else (the caller then uses encoding/json).
func scanOccurrence(s string) (o ledger.Occurrence, ok bool) {
	p := &flatScanner{s: s}
	if !p.byte('{') {
		return o, false
	}
	if p.byte('}') {
		return o, p.end()
	}
	for {
		if !p.byte('"') {
			return o, false
		}
		key, ok := p.str()
		if !ok || !p.byte(':') || !p.field(&o, key) {
			return o, false
		}
		if p.byte('}') {
			return o, p.end()
		}
		if !p.byte(',') {
			return o, false
		}
	}
}

// field reads the value of key into o; false for a name that is not
// exactly one of its fields.
func (p *flatScanner) field(o *ledger.Occurrence, key string) bool {
	var str *string
	var num *int64
	var n int64
	switch key {
	case "id":
		str = &o.ID
	case "status":
		str = &o.Status
	case "reason":
		str = &o.Reason
	case "node":
		str = &o.Node
	case "trigger":
		str = &o.Trigger
	case "run_id":
		str = &o.RunID
	case "result":
		str = &o.Result
	case "output_tail":
		str = &o.Output
	case "requester":
		str = &o.Req
	case "slot":
		num = &o.Slot
	case "token":
		num = &o.Token
	case "claimed":
		num = &o.Claimed
	case "started":
		num = &o.Started
	case "finished":
		num = &o.Finished
	case "exit_code", "attempts":
		num = &n
	default:
		return false
	}
	ok := false
	if str != nil {
		*str, ok = p.strValue()
	} else {
		*num, ok = p.int()
	}
	switch key {
	case "exit_code":
		o.ExitCode = int(n)
	case "attempts":
		o.Attempts = int(n)
	}
	return ok
}

// skipSpace skips JSON white space.
func (p *flatScanner) skipSpace() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// byte consumes c after white space, if it is next.
func (p *flatScanner) byte(c byte) bool {
	p.skipSpace()
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

// end reports whether only white space is left.
func (p *flatScanner) end() bool {
	p.skipSpace()
	return p.i == len(p.s)
}

// strValue reads a string value.
func (p *flatScanner) strValue() (string, bool) {
	if !p.byte('"') {
		return "", false
	}
	return p.str()
}

// str reads a string's body after its opening quote: not ok for a raw
// control character, invalid UTF-8 or a lone surrogate escape (which
// encoding/json turns into U+FFFD).
func (p *flatScanner) str() (string, bool) {
	if end := strings.IndexByte(p.s[p.i:], '"'); end >= 0 {
		raw := p.s[p.i : p.i+end]
		if plain(raw) {
			p.i += end + 1
			return raw, true
		}
	}
	escaped := false
	for j := p.i; j < len(p.s); j++ {
		switch c := p.s[j]; {
		case c == '"':
			raw := p.s[p.i:j]
			p.i = j + 1
			if !utf8.ValidString(raw) {
				return "", false
			}
			if !escaped {
				return raw, true
			}
			return unescape(raw)
		case c == '\\':
			escaped = true
			j++
		case c < 0x20:
			return "", false
		}
	}
	return "", false
}

// plain reports whether raw is printable ASCII without a backslash: a
// string body as is.
func plain(raw string) bool {
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c < 0x20 || c >= 0x80 || c == '\\' {
			return false
		}
	}
	return true
}

// unescape resolves the JSON escapes of raw (valid UTF-8).
func unescape(raw string) (string, bool) {
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		if i++; i == len(raw) {
			return "", false
		}
		switch raw[i] {
		case '"', '\\', '/':
			b.WriteByte(raw[i])
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case 'u':
			r, n := unicodeEscape(raw[i-1:])
			if n == 0 {
				return "", false
			}
			b.WriteRune(r)
			i += n - 2
		default:
			return "", false
		}
	}
	return b.String(), true
}

// unicodeEscape reads the \uXXXX escape at the start of s, or a surrogate
// pair of two; n is the bytes read, 0 when not a valid escape or pair.
func unicodeEscape(s string) (rune, int) {
	r, ok := hex4(s)
	if !ok {
		return 0, 0
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	r2, ok := hex4(s[min(6, len(s)):])
	if !ok {
		return 0, 0
	}
	if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
		return d, 12
	}
	return 0, 0
}

// hex4 reads "\uXXXX" at the start of s.
func hex4(s string) (rune, bool) {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return 0, false
	}
	n, err := strconv.ParseUint(s[2:6], 16, 32)
	return rune(n), err == nil
}

// int reads an integer value in JSON's form (no leading zeros, no
// fraction or exponent) that fits int64.
func (p *flatScanner) int() (int64, bool) {
	p.skipSpace()
	j := p.i
	if j < len(p.s) && p.s[j] == '-' {
		j++
	}
	d := j
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' {
		j++
	}
	if j == d || (p.s[d] == '0' && j-d > 1) || (j < len(p.s) && (p.s[j] == '.' || p.s[j] == 'e' || p.s[j] == 'E')) {
		return 0, false
	}
	n, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
	p.i = j
	return n, err == nil
}
