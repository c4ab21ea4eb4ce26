package main

import (
	"context"
	"fmt"
	"io"

	"github.com/cronlock/cronlock/config"
)

// daemonOptions is what the daemon mode gets besides the config.
type daemonOptions struct {
	Environ []string
	Stdout  io.Writer
	Stderr  io.Writer
	Version string
}

// runDaemon runs the daemon on a loaded (ForStart) config until ctx is
// cancelled, and returns the exit code. The engine engineer replaces this
// body.
func runDaemon(ctx context.Context, cfg *config.Config, opts daemonOptions) int {
	_, _ = ctx, cfg
	fmt.Fprintln(opts.Stderr, "daemon not implemented yet")
	return 1
}
