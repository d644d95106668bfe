// SPDX-License-Identifier: Apache-2.0

package kubeletcfg

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// readerEnv puts this test binary in its reader's part (TestMain): it reads
// the kubelet's settings as another user, evictd's case in its DaemonSet
// (root with every capability dropped but a few, no CAP_SYS_PTRACE: other
// processes' /proc/PID/cwd refused, as a user's is).
const readerEnv = "EVICTD_KUBELETCFG_READER"

// readerSpec is what the reader does; readerReport what it read.
type readerSpec struct {
	HostRoot string
	// Hidepid, when set, is the option of a proc filesystem the reader
	// mounts at HostRoot/proc, in a mount namespace of its own, before it
	// becomes UID.
	Hidepid string
	UID     int
}

type readerReport struct {
	Raw    map[string]string
	Err    string
	Reason Reason
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(readerEnv); spec != "" {
		os.Exit(runReader(spec))
	}
	os.Exit(m.Run())
}

func runReader(spec string) int {
	var s readerSpec
	if err := json.Unmarshal([]byte(spec), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if s.Hidepid != "" {
		if err := syscall.Mount("proc", filepath.Join(s.HostRoot, "proc"), "proc", 0, s.Hidepid); err != nil {
			fmt.Fprintln(os.Stderr, "mount proc:", err)
			return 2
		}
	}
	// Go sets these on every thread.
	for _, step := range []func() error{
		func() error { return syscall.Setgroups(nil) },
		func() error { return syscall.Setgid(s.UID) },
		func() error { return syscall.Setuid(s.UID) },
	} {
		if err := step(); err != nil {
			fmt.Fprintln(os.Stderr, "drop to uid", s.UID, err)
			return 2
		}
	}
	var rep readerReport
	r, err := Read(Options{HostRoot: s.HostRoot})
	if err != nil {
		rep.Err, rep.Reason = err.Error(), ReasonOf(err)
	} else {
		rep.Raw = r.Raw
	}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return 2
	}
	return 0
}

// readAs runs Read in a child of this test binary as user nobody (after
// mounting, as root in a mount namespace of its own, a proc filesystem
// with hidepid, when given).
func readAs(t *testing.T, root, hidepid string) readerReport {
	t.Helper()
	spec, _ := json.Marshal(readerSpec{HostRoot: root, Hidepid: hidepid, UID: 65534})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), readerEnv+"="+string(spec))
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the reader: %v\n%s", err, stderr.String())
	}
	var rep readerReport
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("the reader's report %q: %v", out.String(), err)
	}
	return rep
}

// openRoot is a new host root that user nobody can walk (t.TempDir's
// directories are 0700).
func openRoot(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	must(t, os.Chmod(root, 0o755))
	must(t, os.Chmod(filepath.Dir(root), 0o755))
	return root
}

// writeFiles writes each file of files (paths under root).
func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, data := range files {
		p := filepath.Join(root, name)
		must(t, os.MkdirAll(filepath.Dir(p), 0o755))
		must(t, os.WriteFile(p, []byte(data), 0o644))
	}
}

// startStandIn starts the kubelet's stand-in, a real process whose command
// line is a kubelet's with args, in the directory dir, as root; it is
// killed at the test's end.
func startStandIn(t *testing.T, dir string, args ...string) int {
	t.Helper()
	// sh runs under the kubelet's name; ";:" keeps it from exec'ing sleep,
	// which would change the command line.
	cmd := &exec.Cmd{Path: "/bin/sh", Args: append([]string{"kubelet", "-c", "sleep 600; :", "sh"}, args...), Dir: dir}
	must(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Start returns once the exec has begun, but the kernel sets the new
	// command line up a moment later: until then /proc/PID/cmdline reads
	// empty and the stand-in is no kubelet yet (seen under emulation).
	cmdline := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "cmdline")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(cmdline)
		if err == nil && bytes.HasPrefix(b, []byte("kubelet\x00")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still reads %q (%v) 10s after the stand-in's exec", cmdline, b, err)
		}
	}
	return cmd.Process.Pid
}

// TestReadRelativePathRealProcess: the kubelet's stand-in, a real process
// with a relative --config and --config-dir, runs in a real working
// directory. A reader with ptrace access to it (root, as this test runs)
// reads its /proc/PID/cwd and the files there; a reader without (nobody,
// as evictd's DaemonSet is to a kubelet with more capabilities) gets EACCES
// from the real procfs, and the thresholds are unknown, reason
// relative-path, not read from / (where decoys lie) as a guess.
func TestReadRelativePathRealProcess(t *testing.T) {
	cgrouptest.Need(t, os.Geteuid() == 0, "root, to read as user nobody a process that root started")
	root := openRoot(t)
	cwd := filepath.Join(root, "kubelet-cwd")
	must(t, os.MkdirAll(cwd, 0o755))
	pid := startStandIn(t, cwd, "--config=kubelet.yaml", "--config-dir=conf.d")
	// The host root's /proc shows the stand-in alone of the host's
	// processes: another test's stand-in, with a lower PID, would be
	// taken for the kubelet otherwise.
	must(t, os.MkdirAll(filepath.Join(root, "proc"), 0o755))
	must(t, os.Symlink(filepath.Join("/proc", strconv.Itoa(pid)), filepath.Join(root, "proc", strconv.Itoa(pid))))
	// The kubelet's files at its working directory as the host sees it,
	// under the host root; decoys where / would put them.
	writeFiles(t, root, map[string]string{
		filepath.Join(cwd, "kubelet.yaml"):      kc + "evictionHard: {memory.available: 700Mi}\n",
		filepath.Join(cwd, "conf.d", "10.conf"): kc + "evictionHard: {pid.available: 7%}\n",
		"kubelet.yaml":                          kc + "evictionHard: {memory.available: 1Gi}\n",
		"conf.d/10.conf":                        kc + "evictionHard: {pid.available: 9%}\n",
	})

	r, err := Read(Options{HostRoot: root})
	if err != nil {
		t.Fatalf("as root: %v", err)
	}
	if want := map[string]string{"memory.available": "700Mi", "pid.available": "7%"}; !maps.Equal(r.Raw, want) {
		t.Errorf("as root: thresholds %v, want %v from the kubelet's working directory %s", r.Raw, want, cwd)
	}

	rep := readAs(t, root, "")
	if rep.Err == "" {
		t.Fatalf("as nobody: thresholds %v read from a guessed working directory, want them unknown", rep.Raw)
	}
	if rep.Reason != ReasonRelativePath || !strings.Contains(rep.Err, fmt.Sprintf("kubelet pid %d's --config kubelet.yaml is a relative path", pid)) ||
		!strings.Contains(rep.Err, "permission denied") {
		t.Errorf("as nobody: %s (reason %s)\nwant reason relative-path, naming the pid, the flag and the refusal", rep.Err, rep.Reason)
	}
}

// TestReadHiddenProc: a reader that the host's /proc hides the kubelet
// from (a real proc filesystem mounted with hidepid, read as user nobody):
// with hidepid=invisible it lists none of root's processes, with
// hidepid=noaccess it refuses their command lines. Either way the
// kubelet's thresholds are unknown, reason proc-hidden: kubeadm's files
// (decoys here) would be a guess.
func TestReadHiddenProc(t *testing.T) {
	cgrouptest.Need(t, os.Geteuid() == 0, "root, to mount a proc filesystem and read it as user nobody")
	for _, hidepid := range []string{"hidepid=invisible", "hidepid=noaccess"} {
		t.Run(hidepid, func(t *testing.T) {
			root := openRoot(t)
			startStandIn(t, root, "--config=/etc/kubelet.yaml")
			must(t, os.MkdirAll(filepath.Join(root, "proc"), 0o755))
			writeFiles(t, root, map[string]string{
				"etc/kubelet.yaml": kc + "evictionHard: {memory.available: 700Mi}\n",
				KubeadmConfig:      kc + "evictionHard: {memory.available: 1Gi}\n",
			})
			rep := readAs(t, root, hidepid)
			if rep.Err == "" {
				t.Fatalf("thresholds %v read from kubeadm's files, a guess: want them unknown", rep.Raw)
			}
			if rep.Reason != ReasonProcHidden || !strings.Contains(rep.Err, "hides other processes from evictd") {
				t.Errorf("%s (reason %s)\nwant reason proc-hidden", rep.Err, rep.Reason)
			}
		})
	}
}

// TestReasonOf: every failure of Read has its one reason, and a missing
// file in a directory that is there says so rather than ask for a mount.
func TestReasonOf(t *testing.T) {
	kubelet := func(t *testing.T, argv string, files map[string]string) string {
		root := t.TempDir()
		writeFiles(t, root, map[string]string{"proc/1/cmdline": "/sbin/init\x00", "proc/9/cmdline": argv, "proc/9/cgroup": kubeletCgroup})
		writeFiles(t, root, files)
		return root
	}
	for _, c := range []struct {
		name string
		root func(t *testing.T) string
		want Reason
		says string
	}{
		{"not-found", func(t *testing.T) string { return t.TempDir() }, ReasonNotFound, "no kubelet found"},
		{"not-mounted", func(t *testing.T) string {
			return kubelet(t, "kubelet\x00--config=/etc/kubernetes/kubelet.yaml\x00", nil)
		}, ReasonNotMounted, "mount /etc/kubernetes read-only"},
		{"missing", func(t *testing.T) string {
			return kubelet(t, "kubelet\x00--config=/var/lib/kubelet/config.yaml\x00", map[string]string{"var/lib/kubelet/kubeadm-flags.env": "KUBELET_KUBEADM_ARGS=\"\"\n"})
		}, ReasonMissing, "its directory /var/lib/kubelet is visible under host root"},
		// A link into a directory that is not there: the mount named is
		// the link's target's, not the link's own directory, which is.
		{"not-mounted through a link", func(t *testing.T) string {
			root := kubelet(t, "kubelet\x00--config=/var/lib/kubelet/config.yaml\x00", nil)
			must(t, os.MkdirAll(filepath.Join(root, "var/lib/kubelet"), 0o755))
			must(t, os.Symlink("/etc/kubernetes/kubelet.yaml", filepath.Join(root, "var/lib/kubelet/config.yaml")))
			return root
		}, ReasonNotMounted, "through links into /etc/kubernetes) is not visible"},
		{"missing drop-in dir", func(t *testing.T) string {
			return kubelet(t, "kubelet\x00--config-dir=/var/lib/kubelet/conf.d\x00", map[string]string{"var/lib/kubelet/x": ""})
		}, ReasonMissing, "kubelet config /var/lib/kubelet/conf.d (--config-dir of kubelet pid 9) does not exist"},
		{"relative, no cwd", func(t *testing.T) string {
			return kubelet(t, "kubelet\x00--config=kubelet.yaml\x00", map[string]string{"kubelet.yaml": kc})
		}, ReasonRelativePath, "kubelet pid 9's --config kubelet.yaml is a relative path"},
		{"relative in kubeadm's flags", func(t *testing.T) string {
			root := t.TempDir()
			writeFiles(t, root, map[string]string{"proc/1/cmdline": "/sbin/init\x00", KubeadmFlagsEnv: "KUBELET_KUBEADM_ARGS=\"--config=kubelet.yaml\"\n", "kubelet.yaml": kc})
			return root
		}, ReasonRelativePath, "no kubelet process is visible"},
		{"invalid", func(t *testing.T) string {
			return kubelet(t, "kubelet\x00--config=/etc/k.yaml\x00", map[string]string{"etc/k.yaml": kc + "evictionHard: {memory.available: lots}\n"})
		}, ReasonInvalid, `"lots"`},
		{"invalid drop-in", func(t *testing.T) string {
			return kubelet(t, "kubelet\x00--config-dir=/d\x00", map[string]string{"d/10.conf": "kind: KubeletConfiguration\n"})
		}, ReasonInvalid, "drop-in /d/10.conf"},
		{"unreadable", func(t *testing.T) string {
			root := kubelet(t, "kubelet\x00--config=/etc/k.yaml\x00", nil)
			must(t, os.MkdirAll(filepath.Join(root, "etc/k.yaml"), 0o755))
			return root
		}, ReasonUnreadable, "/etc/k.yaml"},
		{"embedded", func(t *testing.T) string {
			return kubelet(t, "/usr/local/bin/k3s\x00server\x00", nil)
		}, ReasonEmbedded, "embedded in k3s"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Read(Options{HostRoot: c.root(t)})
			if err == nil {
				t.Fatal("read: want an error")
			}
			if got := ReasonOf(err); got != c.want || !strings.Contains(err.Error(), c.says) {
				t.Errorf("%v\nreason %s; want %s, saying %q", err, got, c.want, c.says)
			}
			if c.want == ReasonMissing && strings.Contains(err.Error(), "mount") {
				t.Errorf("%v\nadvises a mount: the directory is there", err)
			}
		})
	}
	if !errors.Is(ErrNotFound, ErrNotFound) || ReasonOf(errors.New("x")) != ReasonUnreadable {
		t.Error("an error of no known kind is unreadable")
	}
}

// TestHidepidOf reads mount tables as proc(5) writes them: the top mount
// at the directory decides, and only a proc filesystem's hidepid counts.
func TestHidepidOf(t *testing.T) {
	table := strings.Join([]string{
		`22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:13 - proc proc rw`,
		`63 43 0:39 / /host/proc ro,relatime - proc proc rw,hidepid=invisible`,
		`64 43 0:40 / /host/pro\040c rw,relatime - proc proc rw,hidepid=2,gid=4`,
		`65 43 0:41 / /stacked rw,relatime - proc proc rw,hidepid=noaccess`,
		`66 65 0:42 / /stacked rw,relatime - proc proc rw`,
		`67 43 0:43 / /tmpfs rw,relatime - tmpfs tmpfs rw,hidepid=2`,
		`68 43 0:44 / /off rw,relatime - proc proc rw,hidepid=off`,
	}, "\n")
	for dir, want := range map[string]string{"/proc": "", "/host/proc": "hidepid=invisible", "/host/pro c": "hidepid=2",
		"/stacked": "", "/tmpfs": "", "/off": "", "/elsewhere": ""} {
		if got := HidepidOf([]byte(table), dir); got != want {
			t.Errorf("HidepidOf(%s) = %q, want %q", dir, got, want)
		}
	}
}
