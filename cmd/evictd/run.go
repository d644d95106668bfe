package main

import (
	"context"
	"fmt"
	"io"
)

// runCmd is not built yet.
func runCmd(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "evictd: run is not implemented yet")
	return exitFailure
}
