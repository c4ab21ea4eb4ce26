package config

import (
	"strings"
	"testing"
)

func TestOutput_Keys(t *testing.T) {
	tests := []struct {
		name, yaml string
		want       string // substring of the error; "" = valid
		max        int
		patterns   int
	}{
		{"defaults", "", "", DefaultOutputMaxBytes, 0},
		{"keep none", "output: {max_bytes: 0}\n", "", 0, 0},
		{"the most", "output: {max_bytes: 16777216}\n", "", MaxOutputMaxBytes, 0},
		{"too many", "output: {max_bytes: 16777217}\n", "output.max_bytes: 16777217: want 0 (keep no output) to 16777216", 0, 0},
		{"negative", "output: {max_bytes: -1}\n", "output.max_bytes: -1: want 0", 0, 0},
		{"patterns", "output: {redact: ['tok-[0-9]+', '(?i)password=\\S+']}\n", "", DefaultOutputMaxBytes, 2},
		{"bad pattern", "output: {redact: ['ok', 'tok(']}\n", `output.redact[1]: "tok(" is no regular expression`, 0, 0},
		{"empty match", "output: {redact: ['a*']}\n", `output.redact[0]: "a*" matches the empty string`, 0, 0},
	}
	for _, tt := range tests {
		cfg, err := Parse([]byte(tt.yaml+job("")), "yaml", Options{})
		if tt.want != "" {
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s: got err %v, want one containing %q", tt.name, err, tt.want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if cfg.Output.MaxBytes != tt.max || len(cfg.Output.Patterns) != tt.patterns {
			t.Errorf("%s: got max_bytes %d, %d patterns; want %d, %d", tt.name, cfg.Output.MaxBytes, len(cfg.Output.Patterns), tt.max, tt.patterns)
		}
	}
}
