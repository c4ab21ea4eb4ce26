package bench

import (
	"fmt"
	"strconv"
	"strings"
)

// MonitorCommand is one line of Redis MONITOR output:
// `1339518083.107412 [0 127.0.0.1:60866] "EVALSHA" "…" "3" …`.
type MonitorCommand struct {
	Time   float64  // server time, Unix seconds
	Client string   // "127.0.0.1:60866", or "lua" for a command called by a script
	Args   []string // the command and its arguments, unquoted
}

// ParseMonitorLine parses one MONITOR line (without the leading '+' of
// the RESP simple string). The arguments are unquoted as Redis quotes
// them (sdscatrepr: \" \\ \n \r \t \a \b \xHH).
func ParseMonitorLine(line string) (MonitorCommand, error) {
	var c MonitorCommand
	ts, rest, ok := strings.Cut(line, " [")
	if !ok {
		return c, fmt.Errorf("monitor line %q: no client", line)
	}
	var err error
	if c.Time, err = strconv.ParseFloat(ts, 64); err != nil {
		return c, fmt.Errorf("monitor line %q: time: %w", line, err)
	}
	client, rest, ok := strings.Cut(rest, "] ")
	if !ok {
		return c, fmt.Errorf("monitor line %q: no end of client", line)
	}
	if _, c.Client, ok = strings.Cut(client, " "); !ok {
		return c, fmt.Errorf("monitor line %q: client %q has no db", line, client)
	}
	for rest = strings.TrimSpace(rest); rest != ""; rest = strings.TrimLeft(rest, " ") {
		arg, n, err := unquote(rest)
		if err != nil {
			return c, fmt.Errorf("monitor line %q: %w", line, err)
		}
		c.Args, rest = append(c.Args, arg), rest[n:]
	}
	if len(c.Args) == 0 {
		return c, fmt.Errorf("monitor line %q: no command", line)
	}
	return c, nil
}

// unquote reads one quoted argument at the start of s and returns it and
// the number of bytes of s it took.
func unquote(s string) (string, int, error) {
	if s[0] != '"' {
		return "", 0, fmt.Errorf("argument %q is not quoted", s)
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("argument %q ends in an escape", s)
			}
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'a':
				b.WriteByte('\a')
			case 'b':
				b.WriteByte('\b')
			case 'x':
				if i+2 >= len(s) {
					return "", 0, fmt.Errorf("argument %q: short \\x escape", s)
				}
				v, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
				if err != nil {
					return "", 0, fmt.Errorf("argument %q: \\x escape: %w", s, err)
				}
				b.WriteByte(byte(v))
				i += 2
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", 0, fmt.Errorf("argument %q has no closing quote", s)
}

// Kinds of top-level commands, as Classify names them.
const (
	CallClaim  = "claim"  // the claim script (keys job, state, occ, occidx, paused, pending, inflight)
	CallFinish = "finish" // the finish script (keys job, state, occ, occidx, pending, inflight)
	CallLease  = "renew or release"
	CallPeek   = "record read" // a lower-ranked node's read of the slot's record before its claim (keys occ, state)
	// Not per slot:
	CallProbe     = "health check"            // readiness probe, INFO script (keys: one job key, no ARGV)
	CallMissed    = "missed-occurrence audit" // keys job, state, occ, occidx, inflight
	CallHeartbeat = "node heartbeat"          // keys node:ID, node-jobs:ID
)

// Claim and finish scripts' key counts (redislock/scripts.go).
const (
	claimKeys  = 7
	finishKeys = 6
	auditKeys  = 5
)

// Classify names a top-level command of cronlock's: one of the Call
// kinds for the calls of a run, with the slot the call carries (a
// claim's ARGV[1], a record read's field, the finish record's "slot"
// field), otherwise the upper-cased command name and no slots.
// prefix is redis.key_prefix.
func Classify(c MonitorCommand, prefix string) (kind string, slots []int64) {
	name := strings.ToUpper(c.Args[0])
	if (name != "EVALSHA" && name != "EVAL") || len(c.Args) < 3 {
		return name, nil
	}
	nkeys, err := strconv.Atoi(c.Args[2])
	if err != nil || nkeys < 0 || len(c.Args) < 3+nkeys {
		return name, nil
	}
	keys, argv := c.Args[3:3+nkeys], c.Args[3+nkeys:]
	switch {
	case nkeys == claimKeys && strings.HasPrefix(keys[4], prefix+"paused:") && len(argv) > 0:
		slot, _ := strconv.ParseInt(argv[0], 10, 64)
		return CallClaim, []int64{slot}
	case nkeys == finishKeys && strings.HasPrefix(keys[4], prefix+"pending:") && len(argv) > 5:
		slot, _ := strconv.ParseInt(argv[5], 10, 64) // the index score: the slot (a manual run's claim time)
		return CallFinish, []int64{slot}
	case nkeys == 2 && strings.HasPrefix(keys[0], prefix+"occ:") && len(argv) == 1:
		slot, _ := strconv.ParseInt(argv[0], 10, 64)
		return CallPeek, []int64{slot}
	case nkeys == auditKeys && strings.HasPrefix(keys[4], prefix+"inflight:"):
		return CallMissed, nil
	case nkeys == 2 && strings.HasPrefix(keys[1], prefix+"pending:"), // renew
		nkeys == 1 && strings.HasPrefix(keys[0], prefix+"job:") && len(argv) > 0: // release
		return CallLease, nil
	case nkeys == 1 && strings.HasPrefix(keys[0], prefix+"job:"):
		return CallProbe, nil // the readiness probe and the INFO script: a job key, no ARGV
	case nkeys >= 1 && strings.HasPrefix(keys[0], prefix+"node:"):
		return CallHeartbeat, nil // keys node:ID and node-jobs:ID (one key before the job hashes key)
	}
	return name + " (script)", nil
}
