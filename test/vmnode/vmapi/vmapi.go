// SPDX-License-Identifier: Apache-2.0

// Package vmapi is the wire format of the VM node's guest agent
// (test/cmd/vmagent) and its host-side client (test/vmnode.Agent): JSON
// bodies of POST /exec, /spawn and /signal, and what `vmagent crossing`
// prints.
package vmapi

// ExecRequest asks the agent to run a command and wait for it.
type ExecRequest struct {
	Argv []string `json:"argv"`
	// Stdin is the command's standard input; empty means /dev/null.
	Stdin string `json:"stdin,omitempty"`
	// TimeoutSeconds bounds the command; 0 means the agent's default.
	TimeoutSeconds float64 `json:"timeoutSeconds,omitempty"`
	// Env is appended to the agent's environment (later entries win).
	Env []string `json:"env,omitempty"`
}

// ExecResponse is how the command ended.
type ExecResponse struct {
	// ExitCode is the command's exit status, 128+N when signal N killed
	// it, -1 when it could not be started or timed out (Error says which).
	ExitCode int     `json:"exitCode"`
	Stdout   string  `json:"stdout"`
	Stderr   string  `json:"stderr"`
	Seconds  float64 `json:"seconds"`
	Error    string  `json:"error,omitempty"`
}

// SpawnRequest starts a detached daemon.
type SpawnRequest struct {
	Argv []string `json:"argv"`
	// Log receives the daemon's stdout and stderr, appended; empty means
	// /dev/null.
	Log string   `json:"log,omitempty"`
	Env []string `json:"env,omitempty"`
}

// SpawnResponse names the daemon's pid in the guest.
type SpawnResponse struct {
	PID int `json:"pid"`
}

// SignalRequest signals a daemon the agent spawned ("TERM", "KILL", "INT", "HUP").
type SignalRequest struct {
	PID    int    `json:"pid"`
	Signal string `json:"signal"`
}

// SignalResponse echoes what was sent.
type SignalResponse struct {
	PID    int    `json:"pid"`
	Signal string `json:"signal"`
}

// Crossing is what `vmagent crossing` prints: when the guest's
// memory.available was last seen at or above the level and first seen below
// it (guest wall clock, Unix nanoseconds), so that a test can set an agent's
// reaction, logged with the same clock, against it.
type Crossing struct {
	LastAboveUnixNano int64 `json:"lastAboveUnixNano"`
	AtUnixNano        int64 `json:"atUnixNano"`
	// Available is the value first seen below the level, bytes.
	Available int64 `json:"available"`
	// Before is the value of the first read, before the trigger ran.
	Before int64 `json:"before"`
	Reads  int   `json:"reads"`
	// Trigger is the trigger command's combined output.
	Trigger string `json:"trigger,omitempty"`
}
