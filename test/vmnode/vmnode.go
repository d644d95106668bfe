// SPDX-License-Identifier: Apache-2.0

// Package vmnode boots a throwaway Linux guest under QEMU to test evictd on a
// real cgroup v2 memory controller, which the project's machines lack (they
// mount the memory controller on cgroup v1).
//
// The pieces come from hack/vm/prepare.sh OUTDIR (make vm-smoke runs it): a
// Debian kernel and a busybox initramfs whose /init mounts cgroup2 with
// memory, pids, cpu and io enabled on /sys/fs/cgroup, the host's root
// read-only at /host and a writable share at /out, runs one shell script and
// powers off; with evictd.init=systemd in KernelArgs it execs systemd as PID 1
// in the root the script left at /node instead (StartNode's systemd node). Boot runs that guest under TCG (the machines' /dev/kvm is a
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
	// Disks are raw disk images, the guest's /dev/vda, /dev/vdb and on.
	Disks []string
	// HostForwards and GuestForwards give the guest a network device
	// (QEMU user networking, 10.0.2.15/24, restricted to these forwards);
	// without any it has none.
	HostForwards  []HostForward
	GuestForwards []GuestForward
	// KernelArgs are appended to the kernel command line.
	KernelArgs []string
	// Shares are host directories the guest may mount read-only over 9p
	// by their tags, besides the host's root (hostroot) and OutDir (out):
	// a directory a guest overlay stacks on the host's root must come
	// through a share of its own, as overlayfs refuses a layer inside
	// another layer.
	Shares []Share
}

// Share is a host directory the guest mounts read-only with
// mount -t 9p -o trans=virtio,version=9p2000.L Tag DIR.
type Share struct {
	Tag, Path string
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
	vm, err := Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	return vm.Wait()
}

// VM is a guest started by Start and still running until Wait returns.
type VM struct {
	opts    Options
	cmd     *exec.Cmd
	cancel  context.CancelFunc
	ctx     context.Context
	start   time.Time
	pw      *io.PipeWriter
	done    chan struct{} // the console reader has finished
	logFile *os.File

	mu      sync.Mutex
	console bytes.Buffer
	res     *Result
	waitErr error
	// killed: QEMU ended by the timeout or Kill, noted as it exits, since
	// Wait's own cancel would make every later Wait say so.
	killed bool
	waited chan struct{}
}

// Start boots the guest and returns while it runs. Wait for its end, or
// Kill it; either way Wait must be called to release it.
func Start(ctx context.Context, opts Options) (*VM, error) {
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

	vm := &VM{opts: opts, logFile: logFile, done: make(chan struct{}), waited: make(chan struct{})}
	vm.ctx, vm.cancel = context.WithTimeout(ctx, opts.Timeout)
	vm.cmd = exec.CommandContext(vm.ctx, QEMU, qemuArgs(opts, out)...)
	vm.cmd.Stdin = nil // /dev/null: nothing reaches the serial console or the monitor
	pr, pw := io.Pipe()
	vm.pw = pw
	vm.cmd.Stdout = pw
	vm.cmd.Stderr = pw
	vm.cmd.WaitDelay = 5 * time.Second
	vm.res = &Result{ConsoleLog: logPath, ExitCode: -1}
	vm.start = time.Now()
	go vm.readConsole(pr)
	if err := vm.cmd.Start(); err != nil {
		vm.cancel()
		_ = pw.Close()
		<-vm.done
		logFile.Close()
		return nil, fmt.Errorf("vmnode: starting %s: %w", QEMU, err)
	}
	go vm.wait()
	return vm, nil
}

func (vm *VM) readConsole(pr io.Reader) {
	defer close(vm.done)
	sink := io.Writer(vm.logFile)
	if vm.opts.Console != nil {
		sink = io.MultiWriter(vm.logFile, vm.opts.Console)
	}
	r := bufio.NewReader(pr)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			vm.mu.Lock()
			if vm.res.BootTime == 0 && bytes.Contains(line, readyLine) {
				vm.res.BootTime = time.Since(vm.start)
			}
			vm.console.Write(line)
			vm.mu.Unlock()
			_, _ = sink.Write(line)
		}
		if err != nil {
			return
		}
	}
}

func (vm *VM) wait() {
	defer close(vm.waited)
	err := vm.cmd.Wait()
	vm.mu.Lock()
	vm.res.Duration = time.Since(vm.start)
	vm.waitErr = err
	vm.killed = vm.ctx.Err() != nil
	vm.mu.Unlock()
	_ = vm.pw.Close()
	<-vm.done
	vm.logFile.Close()
}

// Done is closed when QEMU has exited.
func (vm *VM) Done() <-chan struct{} { return vm.waited }

// Console is the serial console so far, without terminal escapes.
func (vm *VM) Console() string {
	vm.mu.Lock()
	defer vm.mu.Unlock()
	return escapeRE.ReplaceAllString(vm.console.String(), "")
}

// Kill ends QEMU at once (the guest's disks are throwaway).
func (vm *VM) Kill() {
	vm.cancel()
}

// Wait waits for QEMU to exit and says how the guest ended (see Boot).
func (vm *VM) Wait() (*Result, error) {
	<-vm.waited
	defer vm.cancel()
	vm.mu.Lock()
	defer vm.mu.Unlock()
	res := vm.res
	res.Console = escapeRE.ReplaceAllString(vm.console.String(), "")
	if m := exitRE.FindAllStringSubmatch(res.Console, -1); len(m) > 0 {
		res.ExitCode, _ = strconv.Atoi(m[len(m)-1][1])
	}
	reachedPoweroff := bytes.Contains(vm.console.Bytes(), poweroffLine)
	switch {
	case vm.killed:
		return res, fmt.Errorf("vmnode: the guest did not power off within %s (killed): %w", vm.opts.Timeout, vm.ctx.Err())
	case vm.waitErr != nil:
		return res, fmt.Errorf("vmnode: %s: %w", QEMU, vm.waitErr)
	case !reachedPoweroff:
		return res, errors.New("vmnode: QEMU exited before the guest's init powered off (a kernel panic?); see " + res.ConsoleLog)
	}
	res.PoweredOff = true
	return res, nil
}

// HostForward makes the guest's TCP port GuestPort reachable on the host at
// 127.0.0.1:HostPort.
type HostForward struct{ HostPort, GuestPort int }

// GuestForward runs Command on the host for every guest connection to
// GuestAddr (for example 10.0.2.100:6443), the connection on its stdin and
// stdout: a relay to a host loopback service (vmagent dial).
type GuestForward struct {
	GuestAddr string
	Command   string
}

// qemuCPU is the guest's CPU model: everything TCG emulates but ERMS and
// FSRM. With them the guest's kernel clears every new page with one rep
// stosb and Go copies with rep movsb, which TCG runs a byte at a time:
// under "max" a process took 7.3-8.3 s to touch 384 MiB, without them
// 1.4-1.6 s (qemu64's figure too), and a fork and exec of /bin/true
// 9.6-12 ms against 8.0-10.1 (2026-11-27, one guest each: two under max,
// four without).
const qemuCPU = "max,-erms,-fsrm"

// qemuArgs is QEMU's command line: TCG, serial console on stdout, the host's
// root read-only and out writable over 9p; a network device only when there
// are forwards, and then restricted to them.
func qemuArgs(opts Options, out string) []string {
	cmdline := strings.Join(append([]string{
		"console=ttyS0", "panic=-1", "quiet", "loglevel=3",
		"cgroup_no_v1=all", "systemd.unified_cgroup_hierarchy=1",
		"evictd.cmd=/out/" + scriptName,
	}, opts.KernelArgs...), " ")
	args := []string{
		"-accel", "tcg", "-cpu", qemuCPU,
		"-smp", strconv.Itoa(opts.CPUs),
		"-m", strconv.Itoa(opts.MemoryMiB),
		"-nographic", "-no-reboot",
		"-kernel", kernel(opts.Dir),
		"-initrd", filepath.Join(opts.Dir, initramfs),
		"-append", cmdline,
		"-virtfs", "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap",
		"-virtfs", "local,path=" + qemuEscape(out) + ",mount_tag=out,security_model=none",
	}
	for _, sh := range opts.Shares {
		args = append(args, "-virtfs", "local,path="+qemuEscape(sh.Path)+",mount_tag="+qemuEscape(sh.Tag)+
			",security_model=none,readonly=on,multidevs=remap")
	}
	for _, d := range opts.Disks {
		args = append(args, "-drive", "file="+qemuEscape(d)+",format=raw,if=virtio,cache=unsafe")
	}
	if len(opts.HostForwards) == 0 && len(opts.GuestForwards) == 0 {
		return append(args, "-nic", "none")
	}
	// restrict=on: the guest reaches nothing but the forwards below, and
	// the host side of each is a loopback address.
	netdev := "user,id=n0,restrict=on"
	for _, f := range opts.HostForwards {
		netdev += fmt.Sprintf(",hostfwd=tcp:127.0.0.1:%d-:%d", f.HostPort, f.GuestPort)
	}
	for _, f := range opts.GuestForwards {
		netdev += ",guestfwd=tcp:" + f.GuestAddr + "-cmd:" + qemuEscape(f.Command)
	}
	return append(args, "-netdev", netdev, "-device", "virtio-net-pci,netdev=n0")
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
