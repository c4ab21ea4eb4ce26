package schedule

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// cronexprFields is how cronexpr splits a line into fields (fieldFinder in
// cronexpr_parse.go).
var cronexprFields = regexp.MustCompile(`\S+`)

// wholeLine is cronValidate as it was before verdicts: one cronexpr.Parse
// of the joined 7-field line.
func wholeLine(fields []string) error {
	return cronexprParse(strings.Join(fields, " "))
}

// FuzzCronValidate checks that checking each field on its own, with cached
// verdicts, gives exactly the whole-line Parse's verdict and error text,
// for any six fields cronexpr would split the same way (no '@': compile
// rejects it before cronexpr, and cronexpr's macro replacer would rewrite
// the line).
func FuzzCronValidate(f *testing.F) {
	for _, s := range []string{"0 */5 * * * 1-5", "0 61 * * * *", "0 0 25 * * *", "0 0 0 31 2 *", "0 0 0 L * 5L",
		"0 0 0 15W * 1#2", "x 0 0 * * *", "0 0 0 * 13 *", "0 0 0 * * 8", "0 1-70/3 * * jan-dec mon", "0 5-1 * * * *",
		"0 0 0 ? * ?", "0 */0 * * * *", "0 0 0 0 * *", "60 * * * * *"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if strings.Contains(s, "@") {
			return
		}
		fields := cronexprFields.FindAllString(s, -1)
		if len(fields) != 6 {
			return
		}
		fields = append(fields, "*")
		want := wholeLine(fields)
		for range 2 { // the second time from the cache
			got := cronValidate(fields...)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("%q: per field %v, whole line %v", s, got, want)
			}
		}
	})
}

// TestVerdicts_BoundedAndConcurrent checks that verdicts stops keeping
// new fields at maxVerdicts (still checking them) and that concurrent
// callers agree with the whole-line Parse.
func TestVerdicts_BoundedAndConcurrent(t *testing.T) {
	v := &fieldVerdicts{m: map[fieldKey]error{}}
	for i := range maxVerdicts + 100 {
		field := fmt.Sprintf("%d/%d", i%60, 1+i/60) // distinct; steps over 59 are errors, kept too
		if i >= maxVerdicts {
			field = fmt.Sprintf("%d", 60+i) // out of range: an error, not kept
			if v.check(1, field) == nil {
				t.Fatalf("minute %s: accepted", field)
			}
			continue
		}
		v.check(1, field)
	}
	if len(v.m) != maxVerdicts {
		t.Fatalf("%d verdicts kept, want the bound %d", len(v.m), maxVerdicts)
	}
	var wg sync.WaitGroup
	lines := [][]string{{"0", "*/5", "*", "*", "*", "1-5", "*"}, {"0", "61", "*", "*", "*", "*", "*"}, {"0", "0", "25", "*", "*", "*", "*"}}
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				l := lines[(g+i)%len(lines)]
				if got, want := cronValidate(l...), wholeLine(l); fmt.Sprint(got) != fmt.Sprint(want) {
					t.Errorf("%q: per field %v, whole line %v", l, got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A field longer than maxVerdictText is checked but not kept (a megabyte
// list field must not stay in memory after its config is gone), a kept
// text does not share the caller's string, and a position past the
// seventh field is an error, not a panic.
func TestVerdicts_LongFieldsNotKept(t *testing.T) {
	v := &fieldVerdicts{m: map[fieldKey]error{}}
	long := strings.Repeat("1,", 5000) + "2"
	if err := v.check(1, long); err != nil {
		t.Fatalf("long list minute: %v", err)
	}
	if err := v.check(1, long+",61"); err == nil {
		t.Fatal("long list minute with 61: accepted")
	}
	if len(v.m) != 0 {
		t.Errorf("%d verdicts kept for fields over %d bytes, want 0", len(v.m), maxVerdictText)
	}
	short := strings.Repeat("1,", 10) + "2"
	buf := []byte("x" + short)
	view := unsafe.String(&buf[1], len(short))
	if err := v.check(1, view); err != nil {
		t.Fatalf("short minute: %v", err)
	}
	for k := range v.m {
		if unsafe.StringData(k.text) == unsafe.StringData(view) {
			t.Error("the kept text is the caller's string, not a copy")
		}
	}
	if err := v.check(7, "*"); err == nil {
		t.Error("position 7: no error")
	}
}
