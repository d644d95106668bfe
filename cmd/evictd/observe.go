package main

import (
	"context"
	"fmt"
	"io"
)

// observeCmd is not built yet.
func observeCmd(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "evictd: observe is not implemented yet")
	return exitFailure
}
