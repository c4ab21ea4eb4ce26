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
// longer than Spec.MaxLine are cut into pieces; memory use is bounded by
// MaxLine, TailSize and a fixed read buffer, whatever the job prints.
//
// Zombies: after group members are killed they are reparented to init (or
// the nearest subreaper), which must reap them. A member that is a zombie
// counts as gone. If the daemon itself runs as PID 1 (a container without an
// init), it must reap orphans; this package does not.
package process
