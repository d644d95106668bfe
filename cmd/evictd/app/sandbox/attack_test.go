// SPDX-License-Identifier: Apache-2.0

//go:build linux

package sandbox

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// The helper process: TestMain runs the test binary as the attacker when
// attackerStage is set (see attack).
const (
	attackerStage = "EVICTD_SANDBOX_ATTACKER"
	// stageConfine: a fresh mount namespace, the secret's directory hidden
	// under a tmpfs, the capability bounding set cut to the shipped set;
	// then the binary executes itself as stageAttack.
	stageConfine = "confine"
	// stageAttack: the process evictd's container would be, which enters
	// the sandbox named by attackerSandbox and tries the attack.
	stageAttack     = "attack"
	attackerSandbox = "EVICTD_SANDBOX_KIND"
	attackerPlan    = "EVICTD_SANDBOX_PLAN"
)

// shippedCaps is the container's capability set in the shipped pod spec
// (deploy/daemonset.yaml, the chart): drop ALL, add these; UID 0.
var shippedCaps = []uintptr{unix.CAP_DAC_READ_SEARCH, unix.CAP_IPC_LOCK, unix.CAP_SYS_RESOURCE}

func TestMain(m *testing.M) {
	switch os.Getenv(attackerStage) {
	case stageConfine:
		confine()
	case stageAttack:
		attackAndReport()
	}
	os.Exit(m.Run())
}

// plan is what the attacker is given: a directory it can see, and a
// forged handle of a file it cannot (an attacker brute-forces the inode
// and generation numbers; the test hands over the right ones so that one
// try decides).
type plan struct {
	Visible    string // a directory the attacker can see (its "mount")
	Secret     string // the 0600 file's path, hidden in the attacker's mount namespace
	HandleType int32
	Handle     string // hex
}

// outcome is what the attacker saw, written as JSON on its stdout.
type outcome struct {
	UID           int
	CapEff        string // /proc/self/status, hex
	EnterErr      string
	PathErr       string // reading the secret by its path
	NameToHandle  string // name_to_handle_at's error on the visible file, "" when it succeeded
	NameErrno     int
	OpenByHandle  string // open_by_handle_at's error with the forged handle
	OpenErrno     int
	SecretContent string // what open_by_handle_at let it read
}

// TestFileHandleAttack proves on the host's own filesystem that the
// shipped capability set reads a 0600 file outside every path the process
// can see through open_by_handle_at, and that the seccomp sandbox refuses
// both file-handle calls with EPERM so the file is never read.
func TestFileHandleAttack(t *testing.T) {
	cgrouptest.Need(t, os.Geteuid() == 0, "root, to hide a directory in a mount namespace and keep CAP_DAC_READ_SEARCH")
	own := ownBounding(t)
	cgrouptest.Need(t, own&(1<<unix.CAP_DAC_READ_SEARCH|1<<unix.CAP_SYS_ADMIN|1<<unix.CAP_SETPCAP) == 1<<unix.CAP_DAC_READ_SEARCH|1<<unix.CAP_SYS_ADMIN|1<<unix.CAP_SETPCAP,
		"CAP_DAC_READ_SEARCH, CAP_SYS_ADMIN and CAP_SETPCAP in the test's bounding set")
	if missing := shippedMask() &^ own; missing != 0 {
		// The host's own sandbox may withhold one (CAP_SYS_RESOURCE on
		// some CI machines); none of them but DAC_READ_SEARCH takes part
		// in the attack.
		t.Logf("this machine withholds capabilities %016x of the shipped set; the attacker runs without them", missing)
	}

	base := t.TempDir()
	visible := filepath.Join(base, "visible")
	secretDir := filepath.Join(base, "secret")
	for _, d := range []string{visible, secretDir} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(visible, "file"), []byte("seen"), 0o644); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(secretDir, "key")
	want := fmt.Sprintf("BEGIN PRIVATE KEY %d", os.Getpid())
	if err := os.WriteFile(secret, []byte(want), 0o600); err != nil {
		t.Fatal(err)
	}
	h, _, err := unix.NameToHandleAt(unix.AT_FDCWD, secret, 0)
	cgrouptest.Need(t, err == nil, fmt.Sprintf("a filesystem with file handles under %s (name_to_handle_at: %v)", base, err))
	p := plan{Visible: visible, Secret: secret, HandleType: h.Type(), Handle: hex.EncodeToString(h.Bytes())}

	t.Run("without the sandbox the shipped capabilities read it", func(t *testing.T) {
		o := attack(t, p, None)
		if o.PathErr == "" {
			t.Fatalf("the secret's directory is not hidden from the attacker: it read %s by its path", secret)
		}
		if o.NameToHandle != "" || o.OpenByHandle != "" {
			t.Fatalf("the primitive does not work on this host: name_to_handle_at: %q, open_by_handle_at: %q", o.NameToHandle, o.OpenByHandle)
		}
		if o.SecretContent != want {
			t.Fatalf("open_by_handle_at read %q, want the secret %q", o.SecretContent, want)
		}
	})
	t.Run("the seccomp sandbox refuses it", func(t *testing.T) {
		o := attack(t, p, Seccomp)
		if o.EnterErr != "" {
			t.Fatalf("Enter(seccomp): %s", o.EnterErr)
		}
		if o.SecretContent != "" {
			t.Fatalf("sandbox in force, yet open_by_handle_at read the 0600 file: %q", o.SecretContent)
		}
		if o.NameErrno != int(unix.EPERM) {
			t.Errorf("name_to_handle_at: %q (errno %d), want EPERM", o.NameToHandle, o.NameErrno)
		}
		if o.OpenErrno != int(unix.EPERM) {
			t.Errorf("open_by_handle_at: %q (errno %d), want EPERM", o.OpenByHandle, o.OpenErrno)
		}
	})
}

// attack runs the attacker as a child: in a mount namespace of its own
// where the secret's directory is hidden, with exactly the shipped
// capabilities, in the sandbox kind.
func attack(t *testing.T, p plan, kind Kind) outcome {
	t.Helper()
	js, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), attackerStage+"="+stageConfine, attackerSandbox+"="+string(kind), attackerPlan+"="+string(js))
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // and / made private
	if err := cmd.Run(); err != nil {
		t.Fatalf("attacker (sandbox %s): %v; stderr: %s", kind, err, stderr.String())
	}
	var o outcome
	if err := json.Unmarshal(stdout.Bytes(), &o); err != nil {
		t.Fatalf("attacker's report %q: %v; stderr: %s", stdout.String(), err, stderr.String())
	}
	t.Logf("attacker (sandbox %s): %+v", kind, o)
	if o.UID != 0 {
		t.Fatalf("attacker runs as UID %d, want 0 as shipped", o.UID)
	}
	wantCaps := shippedMask() & ownBounding(t)
	if got, err := strconv.ParseUint(o.CapEff, 16, 64); err != nil || got != wantCaps {
		t.Fatalf("attacker's effective capabilities %s, want exactly %016x (DAC_READ_SEARCH, IPC_LOCK, SYS_RESOURCE, less those this machine withholds from the test)", o.CapEff, wantCaps)
	}
	return o
}

func shippedMask() uint64 {
	var m uint64
	for _, c := range shippedCaps {
		m |= 1 << c
	}
	return m
}

// ownBounding is this process's capability bounding set.
func ownBounding(t *testing.T) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(statusField("CapBnd"), 16, 64)
	if err != nil {
		t.Fatalf("CapBnd in /proc/self/status: %v", err)
	}
	return v
}

// confine is the first stage: it hides the secret's directory under a
// tmpfs in this process's own mount namespace (the attacker's view:
// mounts, not the filesystem they come from), cuts the capability
// bounding set to the shipped set on this thread, and executes the test
// binary again from it: for UID 0 the new program's capabilities are the
// bounding set.
func confine() {
	var p plan
	must(json.Unmarshal([]byte(os.Getenv(attackerPlan)), &p))
	must(wrap("make / private", unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, "")))
	must(wrap("hide the secret", unix.Mount("tmpfs", filepath.Dir(p.Secret), "tmpfs", unix.MS_RDONLY, "size=4k")))
	runtime.LockOSThread() // the bounding set is per thread; exec keeps this one's
	keep := map[uintptr]bool{}
	for _, c := range shippedCaps {
		keep[c] = true
	}
	for c := uintptr(0); c <= unix.CAP_LAST_CAP; c++ {
		if !keep[c] {
			if err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
				must(fmt.Errorf("PR_CAPBSET_DROP %d: %w", c, err))
			}
		}
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, attackerStage+"=") })
	env = append(env, attackerStage+"="+stageAttack)
	must(wrap("exec", syscall.Exec("/proc/self/exe", []string{os.Args[0], "-test.run=^$"}, env)))
}

// attackAndReport is the second stage: the attacker, as evictd's process
// would be, enters the sandbox and tries the file-handle attack.
func attackAndReport() {
	var p plan
	must(json.Unmarshal([]byte(os.Getenv(attackerPlan)), &p))
	o := outcome{UID: os.Getuid(), CapEff: statusField("CapEff")}
	if _, err := Enter(Kind(os.Getenv(attackerSandbox))); err != nil {
		o.EnterErr = err.Error()
	}
	if _, err := os.ReadFile(p.Secret); err != nil {
		o.PathErr = err.Error()
	}
	if _, _, err := unix.NameToHandleAt(unix.AT_FDCWD, filepath.Join(p.Visible, "file"), 0); err != nil {
		o.NameToHandle, o.NameErrno = err.Error(), errnoOf(err)
	}
	// The mount fd names the filesystem: any directory of the visible
	// mount will do.
	mountFd, err := unix.Open(p.Visible, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	must(err)
	raw, err := hex.DecodeString(p.Handle)
	must(err)
	fd, err := unix.OpenByHandleAt(mountFd, unix.NewFileHandle(p.HandleType, raw), unix.O_RDONLY)
	if err != nil {
		o.OpenByHandle, o.OpenErrno = err.Error(), errnoOf(err)
	} else {
		f := os.NewFile(uintptr(fd), "by-handle")
		buf := make([]byte, 4096)
		n, _ := f.Read(buf)
		o.SecretContent = string(buf[:n])
		_ = f.Close()
	}
	must(json.NewEncoder(os.Stdout).Encode(o))
	os.Exit(0)
}

// statusField is a field of /proc/self/status.
func statusField(name string) string {
	status, err := os.ReadFile("/proc/self/status")
	must(err)
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, name+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func errnoOf(err error) int {
	var e syscall.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return -1
}

func wrap(what string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "attacker:", err)
		os.Exit(3)
	}
}
