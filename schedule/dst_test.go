package schedule

import (
	"slices"
	"testing"
	"time"
)

// TestNextDSTEffect checks which 2027 transition (New_York Mar 14 / Nov 7
// at 02:00; London Mar 28 at 01:00 / Oct 31 at 02:00) affects a schedule,
// and what fires instead, against fixed reference instants.
func TestNextDSTEffect(t *testing.T) {
	tests := []struct {
		expr, zone, from string
		want             bool
		gap              bool
		transition, fire string // RFC 3339 UTC
		wall             []string
		affected         int
	}{
		{"30 2 * * *", "America/New_York", "2027-01-01T00:00:00Z", true, true, "2027-03-14T07:00:00Z", "2027-03-14T07:00:00Z", []string{"02:30"}, 1},
		{"30 2 * * *", "America/New_York", "2027-04-01T00:00:00Z", true, true, "2028-03-12T07:00:00Z", "2028-03-12T07:00:00Z", []string{"02:30"}, 1},
		{"30 1 * * *", "America/New_York", "2027-04-01T00:00:00Z", true, false, "2027-11-07T06:00:00Z", "2027-11-07T05:30:00Z", []string{"01:30"}, 1},
		{"0,30 2 * * *", "America/New_York", "2027-01-01T00:00:00Z", true, true, "2027-03-14T07:00:00Z", "2027-03-14T07:00:00Z", []string{"02:00", "02:30"}, 2},
		{"0 1 * * *", "Europe/London", "2027-01-01T00:00:00Z", true, true, "2027-03-28T01:00:00Z", "2027-03-28T01:00:00Z", []string{"01:00"}, 1},
		{"0 1 * * *", "Europe/London", "2027-04-01T00:00:00Z", true, false, "2027-10-31T01:00:00Z", "2027-10-31T00:00:00Z", []string{"01:00"}, 1},
		{"15 0-59 2 * * *", "America/New_York", "2027-01-01T00:00:00Z", true, true, "2027-03-14T07:00:00Z", "2027-03-14T07:00:00Z", []string{"02:00:15", "02:01:15", "02:02:15"}, 60},
		{"30 2 * * *", "UTC", "2027-01-01T00:00:00Z", false, false, "", "", nil, 0},
		{"30 12 * * *", "America/New_York", "2027-01-01T00:00:00Z", false, false, "", "", nil, 0},
		{"30 2 * * 1-5", "America/New_York", "2027-01-01T00:00:00Z", false, false, "", "", nil, 0}, // transitions fall on Sundays
		{"*/5 * * * *", "America/New_York", "2027-01-01T00:00:00Z", false, false, "", "", nil, 0},
		{"30 * * * *", "America/New_York", "2027-01-01T00:00:00Z", false, false, "", "", nil, 0},
		{"@every 1h", "America/New_York", "2027-01-01T00:00:00Z", false, false, "", "", nil, 0},
	}
	for _, tt := range tests {
		t.Run(tt.expr+" "+tt.zone+" "+tt.from, func(t *testing.T) {
			loc, err := time.LoadLocation(tt.zone)
			if err != nil {
				t.Fatal(err)
			}
			s, err := Parse(tt.expr, loc)
			if err != nil {
				t.Fatal(err)
			}
			from, _ := time.Parse(time.RFC3339, tt.from)
			e, ok := s.NextDSTEffect(from, from.AddDate(1, 0, 0))
			if ok != tt.want {
				t.Fatalf("NextDSTEffect ok = %v, want %v (%+v)", ok, tt.want, e)
			}
			if !ok {
				return
			}
			if e.Gap != tt.gap || rfc(e.Transition) != tt.transition || rfc(e.Fire) != tt.fire || e.Affected != tt.affected {
				t.Errorf("got gap %v transition %s fire %s affected %d, want gap %v transition %s fire %s affected %d",
					e.Gap, rfc(e.Transition), rfc(e.Fire), e.Affected, tt.gap, tt.transition, tt.fire, tt.affected)
			}
			var wall []string
			for _, w := range e.WallTimes {
				f := "15:04"
				if len(tt.wall[0]) > 5 {
					f = "15:04:05"
				}
				wall = append(wall, w.Format(f))
			}
			if !slices.Equal(wall, tt.wall) {
				t.Errorf("wall times %v, want %v", wall, tt.wall)
			}
			if e.Fire.Location() != loc || e.Transition.Location() != loc {
				t.Errorf("fire/transition not in the schedule's zone: %v %v", e.Fire.Location(), e.Transition.Location())
			}
		})
	}
}

func rfc(t time.Time) string { return t.UTC().Format(time.RFC3339) }
