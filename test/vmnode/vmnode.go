// Package vmnode boots a throwaway Linux guest under QEMU to test evictd on a
// real cgroup v2 memory controller, which the project's machines lack (they
// mount the memory controller on cgroup v1).
//
// The pieces come from hack/vm/prepare.sh OUTDIR (make vm-smoke runs it): a
// Debian kernel and a busybox initramfs whose /init mounts cgroup2 with
// memory, pids, cpu and io enabled on /sys/fs/cgroup, the host's root
// read-only at /host and a writable share at /out, runs one shell script and
// powers off. Boot runs that guest under TCG (the machines' /dev/kvm is a
// nested mode that unmodified kernels cannot use), with no network at all.
//
// Code in the guest runs about 40 times slower than on the host: plan
// timeouts for that, and compare latencies measured in the guest only with
// baselines measured in the same guest.
package vmnode

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/evictd/evictd/internal/cgrouptest"
)

// DirEnv overrides where Boot and Need look for prepare.sh's OUTDIR.
const DirEnv = "EVICTD_VM_DIR"

// QEMU is the emulator Boot runs.
const QEMU = "qemu-system-x86_64"

// Files in prepare.sh's OUTDIR.
const (
	kernelELF   = "vmlinux" // uncompressed, booted through PVH (about 2 s faster)
	kernelBz    = "vmlinuz"
	initramfs   = "initramfs.cpio.gz"
	scriptName  = ".vmnode-cmd.sh"
	consoleName = "console.log"
)

// Lines the guest's /init prints (hack/vm/prepare.sh).
var (
	readyLine    = []byte("evictd-vm: ready")
	poweroffLine = []byte("evictd-vm: poweroff")
	exitRE       = regexp.MustCompile(`evictd-vm: command exited (\d+)`)
	// The firmware's terminal resets and cursor moves, left out of Console.
	escapeRE = regexp.MustCompile(`\x1b(\[[0-9;?]*[A-Za-z]|c)`)
)

// Defaults of Options.
const (
	DefaultMemoryMiB = 512
	DefaultCPUs      = 1
	DefaultTimeout   = 3 * time.Minute
)

// Options of one boot.
type Options struct {
	// Dir is prepare.sh's OUTDIR; DefaultDir() when empty.
	Dir string
	// MemoryMiB is the guest's memory (there is no swap).
	MemoryMiB int
	// CPUs is the guest's vCPU count; each is a host thread under TCG.
	CPUs int
	// Script is a shell script the guest runs with busybox sh, as root, in
	// the guest's root cgroup. The host's files are under /host, OutDir is
	// /out. Its exit status is Result.ExitCode.
	Script string
	// OutDir is a host directory the guest may write, mounted at /out. It
	// must exist. Boot writes the script and the console log in it too.
	OutDir string
	// Timeout bounds the whole boot; the guest is killed when it passes.
	Timeout time.Duration
	// Console, when set, receives the serial console as it arrives.
	Console io.Writer
}

// Result of one boot.
type Result struct {
	// Console is the whole serial console (kernel and script output),
	// without the firmware's terminal escapes (ConsoleLog keeps them).
	Console string
	// ConsoleLog is the file that holds Console.
	ConsoleLog string
	// PoweredOff reports that the guest's /init reached its poweroff and
	// QEMU exited by itself before the timeout (not a panic, not a kill).
	PoweredOff bool
	// ExitCode is the script's exit status, or -1 when /init never said.
	ExitCode int
	// BootTime is from QEMU's start to /init's "ready" line (modules
	// loaded, cgroup2 and the shares mounted); 0 when never seen.
	BootTime time.Duration
	// Duration is from QEMU's start to its exit.
	Duration time.Duration
}

// DefaultDir is $EVICTD_VM_DIR, or _output/vm in the module's root.
func DefaultDir() string {
	if d := os.Getenv(DirEnv); d != "" {
		return d
	}
	root, err := RepoRoot()
	if err != nil {
		return filepath.Join("_output", "vm")
	}
	return filepath.Join(root, "_output", "vm")
}

// RepoRoot is the root of the evictd module containing the working directory,
// symlinks resolved (the guest sees the host's real paths under /host).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(bytes.TrimSpace(b), []byte("module github.com/evictd/evictd\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the github.com/evictd/evictd module")
		}
		dir = parent
	}
}

// Missing names what the VM needs and this host lacks: QEMU, or the kernel
// and initramfs from hack/vm/prepare.sh in dir. Empty when nothing.
func Missing(dir string) string {
	var miss []string
	if _, err := exec.LookPath(QEMU); err != nil {
		miss = append(miss, QEMU+" on PATH")
	}
	if kernel(dir) == "" {
		miss = append(miss, "a kernel ("+kernelELF+" or "+kernelBz+") in "+dir)
	}
	if !isFile(filepath.Join(dir, initramfs)) {
		miss = append(miss, filepath.Join(dir, initramfs))
	}
	if len(miss) == 0 {
		return ""
	}
	return strings.Join(miss, ", ") + " (run hack/vm/prepare.sh " + dir + ", or make vm-smoke)"
}

// Need stops t unless the VM pieces in DefaultDir() are there: it skips
// naming what is missing, or fails under CI=true.
func Need(t testing.TB) {
	t.Helper()
	what := Missing(DefaultDir())
	cgrouptest.Need(t, what == "", what)
}

// Boot runs the guest once: it boots, runs opts.Script and powers off. The
// error is for a boot that could not start or ended badly without reaching
// the script's end (killed at the timeout, QEMU failed); a script that
// fails is a Result with a non-zero ExitCode and no error.
func Boot(ctx context.Context, opts Options) (*Result, error) {
	if opts.Dir == "" {
		opts.Dir = DefaultDir()
	}
	if opts.MemoryMiB == 0 {
		opts.MemoryMiB = DefaultMemoryMiB
	}
	if opts.CPUs == 0 {
		opts.CPUs = DefaultCPUs
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	if opts.OutDir == "" {
		return nil, errors.New("vmnode: Options.OutDir is required")
	}
	if m := Missing(opts.Dir); m != "" {
		return nil, fmt.Errorf("vmnode: missing %s", m)
	}
	out, err := filepath.Abs(opts.OutDir)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(out, scriptName), []byte(opts.Script), 0o755); err != nil {
		return nil, fmt.Errorf("vmnode: writing the guest's script: %w", err)
	}
	logPath := filepath.Join(out, consoleName)
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close()

	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, QEMU, qemuArgs(opts, out)...)
	cmd.Stdin = nil // /dev/null: nothing reaches the serial console or the monitor
	pr, pw := io.Pipe()
	cmd.Stdout = pw
	cmd.Stderr = pw
	cmd.WaitDelay = 5 * time.Second

	res := &Result{ConsoleLog: logPath, ExitCode: -1}
	var console bytes.Buffer
	var mu sync.Mutex
	start := time.Now()
	done := make(chan struct{})
	go func() {
		defer close(done)
		sink := io.Writer(logFile)
		if opts.Console != nil {
			sink = io.MultiWriter(logFile, opts.Console)
		}
		r := bufio.NewReader(pr)
		for {
			line, err := r.ReadBytes('\n')
			if len(line) > 0 {
				mu.Lock()
				if res.BootTime == 0 && bytes.Contains(line, readyLine) {
					res.BootTime = time.Since(start)
				}
				console.Write(line)
				mu.Unlock()
				_, _ = sink.Write(line)
			}
			if err != nil {
				return
			}
		}
	}()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("vmnode: starting %s: %w", QEMU, err)
	}
	waitErr := cmd.Wait()
	res.Duration = time.Since(start)
	_ = pw.Close()
	<-done

	mu.Lock()
	defer mu.Unlock()
	res.Console = escapeRE.ReplaceAllString(console.String(), "")
	if m := exitRE.FindAllStringSubmatch(res.Console, -1); len(m) > 0 {
		res.ExitCode, _ = strconv.Atoi(m[len(m)-1][1])
	}
	reachedPoweroff := bytes.Contains(console.Bytes(), poweroffLine)
	switch {
	case ctx.Err() != nil:
		return res, fmt.Errorf("vmnode: the guest did not power off within %s (killed): %w", opts.Timeout, ctx.Err())
	case waitErr != nil:
		return res, fmt.Errorf("vmnode: %s: %w", QEMU, waitErr)
	case !reachedPoweroff:
		return res, errors.New("vmnode: QEMU exited before the guest's init powered off (a kernel panic?); see " + logPath)
	}
	res.PoweredOff = true
	return res, nil
}

// qemuArgs is QEMU's command line: TCG, serial console on stdout, the host's
// root read-only and out writable over 9p, no network device at all.
func qemuArgs(opts Options, out string) []string {
	cmdline := strings.Join([]string{
		"console=ttyS0", "panic=-1", "quiet", "loglevel=3",
		"cgroup_no_v1=all", "systemd.unified_cgroup_hierarchy=1",
		"evictd.cmd=/out/" + scriptName,
	}, " ")
	return []string{
		"-accel", "tcg", "-cpu", "max",
		"-smp", strconv.Itoa(opts.CPUs),
		"-m", strconv.Itoa(opts.MemoryMiB),
		"-nographic", "-no-reboot",
		"-nic", "none",
		"-kernel", kernel(opts.Dir),
		"-initrd", filepath.Join(opts.Dir, initramfs),
		"-append", cmdline,
		"-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + qemuEscape(out) + ",mount_tag=out,security_model=none",
	}
}

// qemuEscape doubles commas, QEMU's escape inside an option value.
func qemuEscape(s string) string { return strings.ReplaceAll(s, ",", ",,") }

// kernel is the kernel image in dir to boot, the uncompressed one first.
func kernel(dir string) string {
	for _, k := range []string{kernelELF, kernelBz} {
		if p := filepath.Join(dir, k); isFile(p) {
			return p
		}
	}
	return ""
}

func isFile(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular() && st.Size() > 0
}
