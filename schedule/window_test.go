package schedule

import (
	"testing"
	"time"
)

// TestInWindow: fire times before active_from are skipped, those at or
// after active_until are not returned, and the base schedule is unchanged.
func TestInWindow(t *testing.T) {
	base, err := Parse("0 * * * *", time.UTC) // hourly
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	from, until := at("2027-01-01T10:00:00Z"), at("2027-01-01T13:00:00Z")
	tests := []struct {
		name        string
		from, until time.Time
		after       string
		want        []string // successive Next results; "" is the zero time
	}{
		{"before the window", from, until, "2027-01-01T00:00:00Z", []string{"2027-01-01T10:00:00Z", "2027-01-01T11:00:00Z", "2027-01-01T12:00:00Z", ""}},
		{"from is inclusive, until exclusive", from, until, "2027-01-01T09:59:59Z", []string{"2027-01-01T10:00:00Z", "2027-01-01T11:00:00Z", "2027-01-01T12:00:00Z", ""}},
		{"inside", from, until, "2027-01-01T11:30:00Z", []string{"2027-01-01T12:00:00Z", ""}},
		{"ended", from, until, "2027-01-01T13:00:00Z", []string{""}},
		{"open start", time.Time{}, until, "2027-01-01T11:30:00Z", []string{"2027-01-01T12:00:00Z", ""}},
		{"open end", from, time.Time{}, "2027-01-01T00:00:00Z", []string{"2027-01-01T10:00:00Z", "2027-01-01T11:00:00Z", "2027-01-01T12:00:00Z", "2027-01-01T13:00:00Z"}},
		{"off the hour", at("2027-01-01T10:00:01Z"), at("2027-01-01T11:00:00Z"), "2027-01-01T00:00:00Z", []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := base.InWindow(tt.from, tt.until)
			if f, u := w.Window(); !f.Equal(tt.from) || !u.Equal(tt.until) {
				t.Errorf("Window() = %v, %v; want %v, %v", f, u, tt.from, tt.until)
			}
			got := at(tt.after)
			for i, want := range tt.want {
				got = w.Next(got)
				if s := fmtZero(got); s != want {
					t.Fatalf("Next #%d = %s, want %s", i+1, s, want)
				}
				if got.IsZero() {
					break
				}
			}
		})
	}
	if f, u := base.Window(); !f.IsZero() || !u.IsZero() {
		t.Errorf("base schedule got a window %v, %v", f, u)
	}
	if got := base.Next(at("2027-01-01T13:00:00Z")); !got.Equal(at("2027-01-01T14:00:00Z")) {
		t.Errorf("base Next = %v, want 14:00: InWindow must not change the base", got)
	}
	again := base.InWindow(from, until).InWindow(time.Time{}, time.Time{})
	if got := again.Next(at("2027-01-01T13:00:00Z")); !got.Equal(at("2027-01-01T14:00:00Z")) {
		t.Errorf("re-windowed Next = %v, want 14:00: InWindow replaces the window", got)
	}
}

// TestInWindow_DSTOnlyInside: a transition outside the active window
// changes nothing, so NextDSTEffect ignores it.
func TestInWindow_DSTOnlyInside(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	s, err := Parse("30 2 * * *", ny)
	if err != nil {
		t.Fatal(err)
	}
	from := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, ok := s.InWindow(time.Time{}, time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)).NextDSTEffect(from, from.AddDate(1, 0, 0)); ok {
		t.Error("window ending before 2027-03-14: got a DST effect, want none")
	}
	if e, ok := s.InWindow(time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC), time.Time{}).NextDSTEffect(from, from.AddDate(1, 0, 0)); !ok || e.Transition.Day() != 14 {
		t.Errorf("window from 2027-03-01: got %+v, %v; want the 2027-03-14 gap", e, ok)
	}
}

func fmtZero(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}
