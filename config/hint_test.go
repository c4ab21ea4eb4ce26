package config

import "testing"

// TestYAML_QuoteHint: a YAML error at an unquoted value starting with * or
// @ says to quote it; other syntax errors carry no such hint.
func TestYAML_QuoteHint(t *testing.T) {
	tests := []struct{ name, data, want string }{
		{"step", "jobs:\n- name: a\n  schedule: */5 * * * *\n  command: x\n",
			`invalid YAML: line 3: did not find expected alphabetic or numeric character; quote the schedule: schedule: "*/5 * * * *" (an unquoted * starts a YAML alias)`},
		{"macro", "jobs:\n- name: a\n  schedule: @daily\n  command: x\n",
			`invalid YAML: line 3: found character that cannot start any token; quote the schedule: schedule: "@daily" (YAML reserves @ at the start of a plain value)`},
		{"flow", "jobs:\n- {name: a, schedule: * * * * *, command: x}\n",
			`invalid YAML: line 2: did not find expected alphabetic or numeric character; quote the schedule: schedule: "* * * * *" (an unquoted * starts a YAML alias)`},
		{"alias-like", "defaults:\n  command: x\njobs:\n- name: a\n  schedule: *5\n",
			`invalid YAML: unknown anchor '5' referenced; quote the schedule: schedule: "*5" (an unquoted * starts a YAML alias)`},
		{"other key", "jobs:\n- name: a\n  schedule: '@daily'\n  command: @notify\n",
			`invalid YAML: line 4: found character that cannot start any token; quote the value: command: "@notify" (YAML reserves @ at the start of a plain value)`},
		{"unrelated", "jobs:\n  - name: a\n    schedule: \"0 2 * * *\n    command: true\n", `invalid YAML: line 3: found unexpected end of stream`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := render(problemsOf(t, tt.data, "yaml", Options{}))
			if len(got) != 1 || got[0] != tt.want {
				t.Errorf("got %q\nwant %q", got, tt.want)
			}
		})
	}
}
