package schedule

import (
	"testing"
	"time"

	"github.com/hashicorp/cronexpr"
)

// The matcher must agree with cronexpr wherever cronexpr is right: UTC, no
// day-of-week range ending at 7/SUN, and day fields that are not in
// cronie's AND case (LIBRARY-NOTES §1.4, §1.5).
func TestMatcher_AgreesWithCronexpr(t *testing.T) {
	exprs := []string{
		"*/5 * * * *", "0 9 * * mon-fri", "15,45 */6 * * *", "0 0 1 */3 *", "0 0 13 * 5",
		"0 0 L * *", "0 0 LW * *", "0 0 15W * *", "0 0 1W * *", "0 0 31W * *", "0 0 * * 5L",
		"0 0 * * 1#2", "0 0 * * 5#5", "0 0 29 2 *", "59 23 31 12 *", "0 12 1,15 * 1#1",
		"0 0 L * 0L", "30 8-17/3 * jan-mar,oct *", "0 0 10-20/5 * 2,4", "7 7 7 7 *",
	}
	from := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, e := range exprs {
		s, err := Parse(e, time.UTC)
		if err != nil {
			t.Fatalf("Parse(%q): %v", e, err)
		}
		ce := cronexpr.MustParse(e)
		a, b := from, from
		for i := range 200 {
			a, b = s.Next(a), ce.Next(b)
			if b.IsZero() && a.Year() > 2099 {
				break // cronexpr stops at 2099
			}
			if !a.Equal(b) {
				t.Fatalf("%q step %d: got %s, cronexpr %s", e, i, a, b)
			}
		}
	}
}
