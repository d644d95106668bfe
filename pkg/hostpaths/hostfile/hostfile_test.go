// SPDX-License-Identifier: Apache-2.0

package hostfile

import (
	"bytes"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// readWithin runs Read on a goroutine and fails the test if it has not
// returned by a generous deadline: a read that blocks (a FIFO without a
// writer) must fail the test, not hang it.
func readWithin(t *testing.T, path string, limit int64) ([]byte, error) {
	t.Helper()
	type result struct {
		data []byte
		err  error
	}
	done := make(chan result, 1)
	go func() {
		d, err := Read(path, limit)
		done <- result{d, err}
	}()
	select {
	case r := <-done:
		return r.data, r.err
	case <-time.After(30 * time.Second):
		t.Fatalf("Read(%s) has not returned after 30s: it blocks", path)
		return nil, nil
	}
}

func TestReadRefusesWhatIsNoRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "config.yaml")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock.conf")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for _, c := range []struct{ path, want string }{
		{fifo, fifo + " is a FIFO, not a regular file: refused"},
		{sock, sock + " is a socket, not a regular file: refused"},
		{dir, dir + " is a directory, not a regular file: refused"},
		// /dev/zero never ends: read whole, it would fill memory.
		{"/dev/zero", "/dev/zero is a character device, not a regular file: refused"},
	} {
		_, err := readWithin(t, c.path, ConfigLimit)
		var nr *NotRegularError
		if !errors.As(err, &nr) || err.Error() != c.want || !IsRefused(err) {
			t.Errorf("Read(%s): %v, want %q", c.path, err, c.want)
		}
	}
}

func TestReadBoundsTheSize(t *testing.T) {
	dir := t.TempDir()
	big := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(big, bytes.Repeat([]byte("#\n"), 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Read(big, ConfigLimit)
	if want := big + " is 2097152 bytes, over the bound of 1048576 bytes: refused"; err == nil || err.Error() != want {
		t.Errorf("an oversize file: %v, want %q", err, want)
	}
	// /proc files say size 0: the bound holds by reading.
	_, err = Read("/proc/self/maps", 16)
	if err == nil || !strings.Contains(err.Error(), "/proc/self/maps is more than 16 bytes, over the bound of 16 bytes") {
		t.Errorf("a /proc file over the bound: %v", err)
	}
	data, err := Read("/proc/self/cmdline", ProcLimit)
	if err != nil || len(data) == 0 {
		t.Errorf("/proc/self/cmdline: %d bytes, %v", len(data), err)
	}
	ok := filepath.Join(dir, "ok.yaml")
	if err := os.WriteFile(ok, []byte("kind: x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if data, err := Read(ok, ConfigLimit); err != nil || string(data) != "kind: x\n" {
		t.Errorf("a regular file: %q, %v", data, err)
	}
	if _, err := Read(filepath.Join(dir, "missing"), ConfigLimit); !errors.Is(err, fs.ErrNotExist) || IsRefused(err) {
		t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
	}
}
