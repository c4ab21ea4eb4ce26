package config

import (
	"fmt"
	"regexp"
)

// Output bounds and redacts the output of runs that leaves the node
// (docs/reference.md, "output"): the last MaxBytes of each run's combined
// stdout and stderr are kept with its occurrence, and every line is
// redacted first (the values of the job's env, and the matches of
// Redact), also in the daemon's log.
type Output struct {
	// MaxBytes is how many bytes of each run's output are kept (the last
	// ones); 0 keeps none. Default DefaultOutputMaxBytes, at most
	// MaxOutputMaxBytes.
	MaxBytes int `mapstructure:"max_bytes"`
	// Redact are regular expressions (Go RE2 syntax) whose matches in
	// output lines are replaced by "[redacted]".
	Redact []string `mapstructure:"redact"`
	// Patterns are Redact compiled, filled by Load.
	Patterns []*regexp.Regexp `mapstructure:"-"`
}

// Bounds of output.max_bytes.
const (
	DefaultOutputMaxBytes = 64 << 10
	// MaxOutputMaxBytes bounds what one run may keep: a running run holds
	// it in the daemon's memory, and every kept occurrence in Redis.
	MaxOutputMaxBytes = 16 << 20
)

// checkOutput validates the output section and compiles its patterns.
func checkOutput(o *Output, p *problems, path func(string) string) {
	if o.MaxBytes < 0 || o.MaxBytes > MaxOutputMaxBytes {
		p.err(path("output.max_bytes"), "%d: want 0 (keep no output) to %d (16 MiB) bytes; the default 65536 keeps the last 64 KiB of each run",
			o.MaxBytes, MaxOutputMaxBytes)
	}
	o.Patterns = o.Patterns[:0]
	for i, s := range o.Redact {
		re, err := regexp.Compile(s)
		if err != nil {
			p.err(fmt.Sprintf("%s[%d]", path("output.redact"), i), "%q is no regular expression (Go RE2 syntax): %v; "+
				"quote it in YAML and escape backslashes in double quotes, e.g. 'token=\\S+'", s, err)
			continue
		}
		if re.MatchString("") {
			p.err(fmt.Sprintf("%s[%d]", path("output.redact"), i), "%q matches the empty string, so it would mark every line; "+
				"make it match at least one byte, e.g. 'token=\\S+' rather than 'token=\\S*'", s)
			continue
		}
		o.Patterns = append(o.Patterns, re)
	}
}
