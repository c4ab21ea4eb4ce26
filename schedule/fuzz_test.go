package schedule

import (
	"testing"
	"time"
)

var fuzzZones = []string{"UTC", "America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata", "Pacific/Chatham"}

// FuzzParse checks that Parse never panics and that an accepted schedule's
// Next is zero or strictly after its argument, strictly increasing over a
// few steps.
func FuzzParse(f *testing.F) {
	seeds := []string{
		"0 */5 * * * *", "30 2 * * *", "*/30 * * * *", "0 0 * * 5-7", "0 0 * * SAT-SUN",
		"0 0 * * 1-7/2", "0 0 */2 * 1", "0 0 13 * 5", "0 0 L * *", "0 0 LW * *", "0 0 15W * *",
		"0 0 * * 5L", "0 0 * * 1#2", "0 0 29 2 *", "0 0 31 2 *", "30-10 5 * * *", "0 0 1 12-1 *",
		"@every 10s", "@every 1h30m", "@daily", "@reboot", "CRON_TZ=Europe/Berlin 0 2 * * *",
		"TZ=Asia/Kolkata @hourly", "? ? ? ? ?", "0 0 * * */7", "0 0 1-7 * */7", "@every 500ms", "",
		"* 2 8 3 */7", "0 0 29 2 */7", "* * 29 2 1#5", "0 0 LW * 0L", "0 0 31W * *", "1-59/58 * * * * *",
	}
	for i, s := range seeds {
		f.Add(s, uint8(i), int64(1767225600+i*86400*37))
	}
	f.Fuzz(func(t *testing.T, expr string, zone uint8, unix int64) {
		loc, err := time.LoadLocation(fuzzZones[int(zone)%len(fuzzZones)])
		if err != nil {
			t.Fatal(err)
		}
		s, err := Parse(expr, loc)
		if err != nil {
			return
		}
		// Keep instants within years 1900-2200.
		const lo, span = -2208988800, 9467020800
		at := time.Unix(lo+((unix%span)+span)%span, 0).In(loc)
		for range 5 {
			next := s.Next(at)
			if next.IsZero() {
				return
			}
			if !next.After(at) {
				t.Fatalf("Parse(%q).Next(%s) = %s, not after", expr, at, next)
			}
			at = next
		}
	})
}
