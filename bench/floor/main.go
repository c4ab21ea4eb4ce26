// Command floor is the bench driver's floor (README.md, "Performance"): a bare
// Go program that starts the same commands at the same instants as the
// daemons would, without any coordination, so that its start latency is
// what this machine can do at best.
//
//	floor -jobs N -seconds S -command CMD   N commands at each whole second for S seconds
//	floor -jobs N -at UNIX -command CMD     N commands at the one instant UNIX (a herd)
//
// -first F numbers the commands' jobs from F (default 0): the herd's floor
// is several floor processes at once, one per node, each with its own
// share of the jobs.
//
// Each command runs as `/bin/sh -c CMD` with CRONLOCK_JOB=jobNNNN (F+j),
// CRONLOCK_SCHEDULED_TIME (RFC 3339 UTC) and CRONLOCK_NODE_ID=floor added
// to the environment, like a daemon's run. floor returns when every command
// has exited; it exits 1 if a command could not be started or failed.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	jobs := flag.Int("jobs", 1, "commands started at each instant")
	seconds := flag.Int("seconds", 0, "start at each whole second for this many seconds")
	at := flag.Int64("at", 0, "start once, at this Unix second")
	command := flag.String("command", "", "shell command")
	first := flag.Int("first", 0, "number of the first job (CRONLOCK_JOB=jobNNNN)")
	flag.Parse()
	if *command == "" || *jobs < 1 || *first < 0 || (*seconds > 0) == (*at > 0) {
		fmt.Fprintln(os.Stderr, "floor: give -command, -jobs ≥ 1, -first ≥ 0 and exactly one of -seconds or -at")
		os.Exit(2)
	}
	var slots []time.Time
	if *at > 0 {
		slots = []time.Time{time.Unix(*at, 0)}
	} else {
		first := time.Now().Truncate(time.Second).Add(time.Second)
		for i := range *seconds {
			slots = append(slots, first.Add(time.Duration(i)*time.Second))
		}
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	base := os.Environ()
	for _, slot := range slots {
		time.Sleep(time.Until(slot))
		st := "CRONLOCK_SCHEDULED_TIME=" + slot.UTC().Format(time.RFC3339)
		for j := range *jobs {
			wg.Go(func() {
				cmd := exec.Command("/bin/sh", "-c", *command)
				cmd.Env = append(base[:len(base):len(base)], fmt.Sprintf("CRONLOCK_JOB=job%04d", *first+j), st, "CRONLOCK_NODE_ID=floor")
				if err := cmd.Run(); err != nil {
					failed.Add(1)
				}
			})
		}
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		fmt.Fprintf(os.Stderr, "floor: %d commands failed\n", n)
		os.Exit(1)
	}
}
