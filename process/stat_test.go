package process

import (
	"os"
	"syscall"
	"testing"
)

func TestParseStat(t *testing.T) {
	line := "4242 (a) b (c)) S 4200 4242 4100 34816 4242 4194560 95 0 0 0 1 2 0 0 20 0 1 0 987654 2654208 372 18446744073709551615 1 2 3 4 5 0 0 0 65538 1 0 0 17 1 0 0 0 0 0\n"
	st, ok := parseStat(4242, []byte(line))
	if want := (procStat{pid: 4242, state: 'S', ppid: 4200, pgrp: 4242, session: 4100, startTime: 987654}); !ok || st != want {
		t.Errorf("got %+v %v, want %+v", st, ok, want)
	}
	for _, bad := range []string{"", "1 (x)", "1 (x) SS 1 2 3", "1 (x) S 1 -2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19", "1 (x) S 1 2 3 4"} {
		if st, ok := parseStat(1, []byte(bad)); ok {
			t.Errorf("parseStat(%q) = %+v, want not ok", bad, st)
		}
	}
	self, ok := readStat(os.Getpid())
	if !ok || self.ppid != os.Getppid() || self.pgrp != syscall.Getpgrp() || self.startTime == 0 || self.state == 0 {
		t.Errorf("readStat(self) = %+v %v; want ppid %d pgrp %d", self, ok, os.Getppid(), syscall.Getpgrp())
	}
}

func BenchmarkReadStat(b *testing.B) {
	pid := os.Getpid()
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := readStat(pid); !ok {
			b.Fatal("readStat failed")
		}
	}
}
