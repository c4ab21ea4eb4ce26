package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
)

// commandSummaries is the one-line description of every subcommand, in the
// order `cronlock help` lists them. TestHelp_ListsEverySubcommand keeps it
// in step with subcommands().
var commandSummaries = []struct{ name, summary string }{
	{"next", "print the next fire times of the configured jobs or of an ad-hoc -schedule"},
	{"status", "per job: next fire time, last run, lease holder, pause, drift (reads Redis, or the memory-backend daemon)"},
	{"history", "the occurrences of one job from the ledger, newest first: ran, skipped (why), missed (reads Redis, or the memory-backend daemon)"},
	{"logs", "the output of one job's last run, or with -f of its running run as it comes (reads Redis, or the memory-backend daemon)"},
	{"nodes", "the daemons of the cluster: live or gone, age, version, config hash, drift (reads Redis, or the memory-backend daemon)"},
	{"run", "run one job now on one daemon of the cluster (or -local here), with its hooks and history"},
	{"backfill", "run one job for every past slot in a range, once each in the cluster"},
	{"pause", "pause one job on every node of the cluster"},
	{"resume", "resume a paused job on every node of the cluster"},
	{"notify", "send a sample alert to each configured webhook and report each result: cronlock notify test [-job JOB] [-event EVENT]"},
	{"completion", "print a bash or zsh completion script: cronlock completion bash|zsh"},
	{"help", "list the commands, or show one command's flags: cronlock help [COMMAND]"},
}

// printOverview writes the `cronlock help` / `cronlock -h` text to w: the
// daemon form, one line per subcommand, then the daemon's flags (from fs).
func printOverview(w io.Writer, daemonFlags func(io.Writer)) {
	fmt.Fprint(w, `cronlock runs shell commands on cron schedules, each slot exactly once in the cluster.

Usage:
  cronlock [-config FILE] [-validate [-strict] [-json] [-all-notices]] [-version [-json]] [-log-level L] [-log-format F]
  cronlock -validate FILE    (the same as -validate -config FILE)
  cronlock COMMAND [flags] [args]

Commands:
`)
	for _, c := range commandSummaries {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, "\nRun 'cronlock help COMMAND' or 'cronlock COMMAND -h' for a command's flags; man cronlock for more.\n\nDaemon flags:\n")
	daemonFlags(w)
}

// runHelp implements `cronlock help [COMMAND]`: the overview on stdout, or
// COMMAND's usage and flags (the same text as `cronlock COMMAND -h`) on
// stdout. An unknown COMMAND is a usage error (exit 2) with a suggestion.
func runHelp(ctx context.Context, args []string, env *runEnv) int {
	switch len(args) {
	case 0:
		printOverview(env.stdout, func(w io.Writer) { newMainFlags(w).fs.PrintDefaults() })
		return 0
	case 1:
	default:
		fmt.Fprintf(env.stderr, "cronlock help: want at most one COMMAND, got %d\n", len(args))
		return 2
	}
	if isHelpFlag(args[0]) || args[0] == "help" {
		fmt.Fprintln(env.stdout, "usage: cronlock help [COMMAND]")
		return 0
	}
	sub, ok := subcommands()[args[0]]
	if !ok {
		unknownCommand(env.stderr, args[0])
		return 2
	}
	return sub(ctx, []string{"-h"}, &runEnv{environ: env.environ, stdout: env.stdout, stderr: env.stdout})
}

// unknownCommand prints the error for an unknown subcommand name, with the
// nearest known name when one is close enough to be a typo.
func unknownCommand(w io.Writer, name string) {
	if looksLikeConfig(name) {
		fmt.Fprintf(w, "cronlock: unknown command %q: give the config file with -config "+
			"(cronlock -config %s to run the daemon, cronlock -validate %s to check it)\n", name, name, name)
		return
	}
	if near := nearestCommand(name); near != "" {
		fmt.Fprintf(w, "cronlock: unknown command %q; did you mean %q? (cronlock help lists the commands)\n", name, near)
		return
	}
	fmt.Fprintf(w, "cronlock: unknown command %q (cronlock help lists the commands)\n", name)
}

// looksLikeConfig reports whether a command-line word names a config file:
// a path with a config file's extension, or one with a slash.
func looksLikeConfig(name string) bool {
	for _, ext := range []string{".yaml", ".yml", ".toml", ".json"} {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	return strings.Contains(name, "/")
}

// nearestCommand returns the subcommand name closest to name by edit
// distance (editDistance), or "" when none is within a third of the name's
// length (at least 1, at most 2 edits).
func nearestCommand(name string) string {
	limit := min(max(len(name)/3, 1), 2)
	best, bestDist := "", limit+1
	for _, c := range commandSummaries {
		if d := editDistance(name, c.name); d < bestDist {
			best, bestDist = c.name, d
		}
	}
	return best
}

// editDistance is the optimal-string-alignment distance between a and b
// in bytes: Levenshtein plus the swap of two adjacent bytes as one edit
// (git's "did you mean" counts a swap as one edit too).
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

// flagLine matches a flag in the flag package's PrintDefaults output.
var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9_-]*)`)

// commandFlags returns the flag names of subcommand name (without the
// dash), read from its own `-h` output so that completion never drifts
// from the flags a command really defines. "" is the daemon form.
func commandFlags(name string) []string {
	var buf bytes.Buffer
	if name == "" {
		newMainFlags(&buf).fs.PrintDefaults()
	} else if sub, ok := subcommands()[name]; ok {
		sub(context.Background(), []string{"-h"}, &runEnv{stdout: &buf, stderr: &buf})
	}
	var flags []string
	for _, m := range flagLine.FindAllStringSubmatch(buf.String(), -1) {
		if !slices.Contains(flags, m[1]) {
			flags = append(flags, m[1])
		}
	}
	return flags
}
