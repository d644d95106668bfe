package main

import (
	"context"
	"fmt"
	"io"
)

// rankCmd is not built yet.
func rankCmd(_ context.Context, _ []string, _, stderr io.Writer) int {
	fmt.Fprintln(stderr, "evictd: rank is not implemented yet")
	return exitFailure
}
