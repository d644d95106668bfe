// SPDX-License-Identifier: Apache-2.0

// Package hack tests the scripts under hack/ that decide something (what to
// build, whether a run failed) with stand-ins for the go command and the
// binaries they run, so that each decision is seen without the minutes the
// real build or fuzzing would take.
package hack
