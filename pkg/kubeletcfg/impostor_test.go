// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgrouptest"
	"github.com/evictd/evictd/pkg/thresholds"
)

// TestReadPassesOverImpostors: the host's /proc (a fixture laid out as a
// cgroup v2 node with the systemd driver) holds, below the real kubelet's
// PID 640 (in /system.slice/kubelet.service), two processes a pod's author
// started as `exec -a kubelet ... --eviction-hard=memory.available<1Ti`:
// PID 212 in a pod's cgroup of the systemd driver (kubepods-*.slice), PID
// 390 with its v1 pids and memory lines under a cgroupfs driver's kubepods
// and its other lines at /. Read takes the real kubelet's 750Mi.
func TestReadPassesOverImpostors(t *testing.T) {
	r, err := Read(Options{HostRoot: filepath.Join("testdata", "impostor")})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Hard[thresholds.MemoryAvailable].String(); got != "750Mi" {
		t.Errorf("memory.available<%s from %q: want the real kubelet's 750Mi", got, r.From)
	}
	if !strings.Contains(r.From, "kubelet pid 640 (cgroup /system.slice/kubelet.service)") {
		t.Errorf("from %q: want kubelet pid 640 and its cgroup", r.From)
	}
}

// kubeletCgroup is a kubelet's /proc/PID/cgroup on a cgroup v2 node that
// runs it as a systemd unit.
const kubeletCgroup = "0::/system.slice/kubelet.service\n"

// readWithin runs Read on a goroutine and fails the test if it has not
// returned by a generous deadline: a read that blocks (a FIFO without a
// writer) fails the test instead of hanging it.
func readWithin(t *testing.T, o Options) (*Result, error) {
	t.Helper()
	type result struct {
		r   *Result
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := Read(o)
		done <- result{r, err}
	}()
	select {
	case r := <-done:
		return r.r, r.err
	case <-time.After(20 * time.Second):
		t.Fatalf("Read has not returned after 20s: it blocks on a file of %s", o.HostRoot)
		return nil, nil
	}
}

// TestReadRefusesWhatIsNoRegularFile: a kubelet's --config (or a drop-in,
// or kubeadm's flags file) that is a FIFO, a socket, a directory, a device,
// or larger than the bound gives one error naming the path and what it
// is, at once: never a hang, never a read without end.
func TestReadRefusesWhatIsNoRegularFile(t *testing.T) {
	cgrouptest.Need(t, os.Geteuid() == 0, "root, to make a device node")
	for _, c := range []struct {
		name, want string
		make       func(path string) error
		dropin     bool
	}{
		{"fifo", "is a FIFO, not a regular file", func(p string) error { return unix.Mkfifo(p, 0o600) }, false},
		{"fifo-dropin", "is a FIFO, not a regular file", func(p string) error { return unix.Mkfifo(p, 0o600) }, true},
		{"socket", "is a socket, not a regular file", func(p string) error {
			l, err := net.Listen("unix", p)
			if err == nil {
				t.Cleanup(func() { l.Close() })
			}
			return err
		}, false},
		{"directory", "is a directory, not a regular file", func(p string) error { return os.Mkdir(p, 0o755) }, false},
		// /dev/null's numbers: the old read took it for an empty file.
		{"device", "is a character device, not a regular file", func(p string) error {
			return unix.Mknod(p, unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3)))
		}, false},
		{"oversize", "is 2097152 bytes, over the bound of 1048576 bytes", func(p string) error {
			return os.WriteFile(p, append([]byte(kc), bytes.Repeat([]byte("#"), 2<<20-len(kc))...), 0o600)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "proc", "5")
			must(t, os.MkdirAll(dir, 0o755))
			must(t, os.MkdirAll(filepath.Join(root, "etc", "k", "d"), 0o755))
			must(t, os.WriteFile(filepath.Join(dir, "cgroup"), []byte("0::/system.slice/kubelet.service\n"), 0o644))
			args := "kubelet\x00--config=/etc/k/config\x00"
			target := filepath.Join(root, "etc", "k", "config")
			hostPath := "/etc/k/config"
			if c.dropin {
				args += "--config-dir=/etc/k/d\x00"
				must(t, os.WriteFile(target, []byte(kc), 0o644))
				target = filepath.Join(root, "etc", "k", "d", "10-x.conf")
				hostPath = "/etc/k/d/10-x.conf"
			}
			must(t, os.WriteFile(filepath.Join(dir, "cmdline"), []byte(args), 0o644))
			must(t, c.make(target))
			_, err := readWithin(t, Options{HostRoot: root})
			if err == nil || !strings.Contains(err.Error(), hostPath) || !strings.Contains(err.Error(), target+" "+c.want) {
				t.Errorf("Read: %v\nwant an error naming %s and %q", err, hostPath, c.want)
			}
		})
	}
}
