// Package process spawns and controls one job command on Linux
// (docs/architecture.md, "Processes and environment"): `<shell> -c <command>` in its own process group, with the
// caller's complete environment, optional work_dir and user.
//
// Every signal goes to the whole process group (kill(-pgid, sig)), so
// background children of the shell die with it. A run never leaves
// processes behind: when the leader exits while other members of its group
// are still alive, they get SIGTERM and, after Spec.KillGrace, SIGKILL, and
// Proc.Wait returns only once the group has no live member. A process that
// left the group (setsid, setpgid) cannot be reached by group signals; if it
// still holds the output pipes, Wait stops reading after Spec.DrainTimeout
// (default 2 s) and closes the read ends instead of hanging.
//
// stdout and stderr are read through separate pipes and streamed line by
// line into the job's logger ("job output", fields stream and line). Lines
// longer than Spec.MaxLine are cut into pieces, never inside a secret of
// Spec.Redact; memory use is bounded by MaxLine, the longest secret,
// TailSize and a fixed read buffer, whatever the job prints.
//
// Waiting: one reaper per process owns all waiting for children (wait4(2)
// on SIGCHLD); Proc never waits itself. With AdoptOrphans (the
// daemon's main) the process is a child subreaper that reaps every child,
// so orphans never stay zombies and it is a correct PID 1 in a container;
// every member of a run's group then ends as our child, and the end of the
// group is noticed on a reap event instead of by scanning /proc.
//
// Leftovers: Proc.Group identifies a group beyond the daemon's life (pgid,
// session, leader start time); KillLeftovers terminates the groups a
// crashed previous incarnation left, after checking that they are still
// the recorded ones. A process that left its group (setsid) cannot be
// found this way.
package process
