// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"strings"
	"testing"
)

// runAsVMAgentEnv makes the test binary run vmagent's main instead of the
// tests, so that tests can run the command as a process of its own.
const runAsVMAgentEnv = "VMAGENT_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runAsVMAgentEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

func TestUsageErrorsAreOneLineAndExit2(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "missing subcommand"},
		{[]string{"bogus"}, `unknown subcommand "bogus"`},
		{[]string{"serve"}, "--listen is required"},
		{[]string{"serve", "--listen=:0", "--nope"}, "flag provided but not defined: -nope"},
		{[]string{"serve", "--listen=:0", "--relay=10.0.0.1:443"}, "is not LISTEN=TARGET"},
		{[]string{"serve", "--listen=:0", "extra"}, `unexpected argument "extra"`},
		{[]string{"dial"}, "want exactly one ADDR"},
		{[]string{"dial", "127.0.0.1:1", "127.0.0.1:2"}, "want exactly one ADDR"},
	} {
		var stderr bytes.Buffer
		code := run(tc.args, io.Discard, &stderr)
		msg := stderr.String()
		if code != exitUsage || !strings.Contains(msg, tc.want) || strings.Count(msg, "\n") != 1 {
			t.Errorf("run(%q) = %d, stderr %q; want %d and one line saying %q", tc.args, code, msg, exitUsage, tc.want)
		}
	}
}

func TestServeFailsWhenARelayCannotListen(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()

	var stdout, stderr bytes.Buffer
	code := run([]string{"serve", "--listen=127.0.0.1:0", "--relay=" + addr + "=127.0.0.1:9"}, &stdout, &stderr)
	if code != exitFail {
		t.Fatalf("exit code %d, want %d", code, exitFail)
	}
	if !strings.Contains(stderr.String(), "relay listen on "+addr) {
		t.Fatalf("stderr %q; want it to name %s", stderr.String(), addr)
	}
	if stdout.Len() != 0 {
		t.Fatalf("stdout %q; want no \"listening\" line when a relay failed", stdout.String())
	}
}
