// SPDX-License-Identifier: Apache-2.0

// Package cmdutil holds what the long-running test commands (cluster,
// nodesim) share: their logger and the shell assignments they publish once
// ready, for hack/ scripts to source.
package cmdutil

import (
	"fmt"
	"io"
	"os"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Logger is the human-readable logger the commands write to stderr; stack
// traces only for DPanic and worse, as the warnings of a test run are not
// bugs.
func Logger() (*zap.Logger, error) {
	return zap.NewDevelopment(zap.AddStacktrace(zapcore.DPanicLevel))
}

// PublishEnv prints env (lines of NAME=value) to out and, when path is not
// empty, also writes it to path with perm.
func PublishEnv(out io.Writer, env, path string, perm os.FileMode) error {
	fmt.Fprint(out, env)
	if path == "" {
		return nil
	}
	if err := os.WriteFile(path, []byte(env), perm); err != nil {
		return fmt.Errorf("write env file: %w", err)
	}
	return nil
}
