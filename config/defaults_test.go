package config

import "testing"

func TestStateDirOf(t *testing.T) {
	for _, tt := range []struct {
		configured string
		env        []string
		want       string
	}{
		{"/srv/c", []string{"STATE_DIRECTORY=/var/lib/cronlock"}, "/srv/c"},
		{"", []string{"STATE_DIRECTORY=/var/lib/cronlock:/var/lib/other"}, "/var/lib/cronlock"},
		{"", nil, DefaultStateDir},
		{"", []string{"STATE_DIRECTORY="}, DefaultStateDir},
	} {
		if got := stateDirOf(tt.configured, tt.env); got != tt.want {
			t.Errorf("stateDirOf(%q, %q) = %q, want %q", tt.configured, tt.env, got, tt.want)
		}
	}
}
