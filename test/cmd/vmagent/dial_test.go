// SPDX-License-Identifier: Apache-2.0

package main

import (
	"bytes"
	"io"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestCheckLoopback(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:6443", "127.1.2.3:1", "[::ffff:127.0.0.1]:80"} {
		if err := checkLoopback(addr); err != nil {
			t.Errorf("checkLoopback(%q) = %v, want nil", addr, err)
		}
	}
	for addr, want := range map[string]string{
		"10.0.2.2:6443":  "only 127.0.0.0/8",
		"0.0.0.0:80":     "only 127.0.0.0/8",
		"localhost:80":   "only 127.0.0.0/8",
		"[::1]:80":       "only 127.0.0.0/8",
		"128.0.0.1:80":   "only 127.0.0.0/8",
		"127.0.0.1":      "missing port",
		"127.0.0.1:0":    "is not 1-65535",
		"127.0.0.1:http": "is not 1-65535",
	} {
		if err := checkLoopback(addr); err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), addr) {
			t.Errorf("checkLoopback(%q) = %v; want an error naming it and saying %q", addr, err, want)
		}
	}
}

func TestDialRefusesNonLoopbackAddress(t *testing.T) {
	var stderr bytes.Buffer
	if code := run([]string{"dial", "10.0.2.2:6443"}, io.Discard, &stderr); code != exitUsage {
		t.Fatalf("exit code %d, want %d", code, exitUsage)
	}
	if msg := stderr.String(); !strings.Contains(msg, `refusing to dial "10.0.2.2:6443"`) || strings.Count(msg, "\n") != 1 {
		t.Fatalf("stderr %q; want one line refusing the address", msg)
	}
}

func TestDialReportsDialFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var stderr bytes.Buffer
	if code := run([]string{"dial", addr}, io.Discard, &stderr); code != exitFail {
		t.Fatalf("exit code %d, want %d", code, exitFail)
	}
	if msg := stderr.String(); !strings.Contains(msg, "dial "+addr) || strings.Count(msg, "\n") != 1 {
		t.Fatalf("stderr %q; want one line naming %s", msg, addr)
	}
}

func TestDialCopiesStdinAndStdoutThroughTheConnection(t *testing.T) {
	// An echo server that only half-closes after the client's half-close:
	// dial returns only if it forwards stdin's end and then reads the
	// connection to its end.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
	}()

	const input = "bytes from the guest\n"
	stdout := &recordingWriter{}
	if err := dial(ln.Addr().String(), readWriteStream{strings.NewReader(input), stdout}); err != nil {
		t.Fatalf("dial: %v", err)
	}
	if stdout.buf.String() != input {
		t.Fatalf("stdout got %q, want the echo %q", stdout.buf.String(), input)
	}
	if !stdout.closedWrite {
		t.Fatal("stdout was not half-closed at the connection's end")
	}
}

// recordingWriter stands in for QEMU's socket on stdout.
type recordingWriter struct {
	buf         bytes.Buffer
	closedWrite bool
}

func (w *recordingWriter) Write(p []byte) (int, error) { return w.buf.Write(p) }
func (w *recordingWriter) CloseWrite() error           { w.closedWrite = true; return nil }

func TestDialProcessOnASocketLikeQEMUGivesIt(t *testing.T) {
	// QEMU's guestfwd cmd: gives the process one end of a socket pair as
	// stdin, stdout and stderr, and keeps the other for the guest.
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Close()
	go func() {
		c, err := backend.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		// Answers and closes before the guest's end: the guest sees that
		// end only if dial shuts down the socket, as a close of its
		// stdout alone leaves stdin and stderr holding it open.
		req := make([]byte, len("the question"))
		if _, err := io.ReadFull(c, req); err == nil {
			io.WriteString(c, "answer to "+string(req))
		}
	}()

	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	guestFile, processEnd := os.NewFile(uintptr(fds[0]), "guest end"), os.NewFile(uintptr(fds[1]), "process end")
	guest, err := net.FileConn(guestFile)
	guestFile.Close()
	if err != nil {
		t.Fatal(err)
	}
	defer guest.Close()

	cmd := exec.Command(os.Args[0], "dial", backend.Addr().String())
	cmd.Env = append(os.Environ(), runAsVMAgentEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = processEnd, processEnd, processEnd
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	processEnd.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer cmd.Process.Kill()

	guest.SetDeadline(time.Now().Add(20 * time.Second))
	io.WriteString(guest, "the question")
	got, err := io.ReadAll(guest)
	if err != nil || string(got) != "answer to the question" {
		t.Fatalf("guest read %q, %v; want %q and the end", got, err, "answer to the question")
	}
	// Now the guest's end: dial's stdin ends and it exits.
	if err := guest.(*net.UnixConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("vmagent dial: %v; want exit 0", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("vmagent dial did not exit after both directions ended")
	}
}
