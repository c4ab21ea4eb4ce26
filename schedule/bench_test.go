package schedule

import (
	"testing"
	"time"
)

func benchNext(b *testing.B, expr, zone string) {
	loc := mustZone(b, zone)
	s, err := Parse(expr, loc)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, loc)
	at := start
	b.ReportAllocs()
	for b.Loop() {
		if at = s.Next(at); at.IsZero() {
			at = start
		}
	}
}

func BenchmarkNext_UTC(b *testing.B)     { benchNext(b, "*/5 * * * *", "UTC") }
func BenchmarkNext_NewYork(b *testing.B) { benchNext(b, "*/5 * * * *", "America/New_York") }

func BenchmarkNext_NewYorkFixed(b *testing.B) { benchNext(b, "30 2 * * *", "America/New_York") }
func BenchmarkNext_AndDays(b *testing.B)      { benchNext(b, "0 0 */2 * 1", "UTC") }
func BenchmarkNext_Every(b *testing.B)        { benchNext(b, "@every 10s", "UTC") }

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("0 9 * * mon-fri", time.UTC); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkNext_Weekdays(b *testing.B) { benchNext(b, "0 9 * * mon-fri", "UTC") }
