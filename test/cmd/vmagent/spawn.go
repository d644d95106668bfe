// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/evictd/evictd/test/vmnode/vmapi"

	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
)

// errNoProcess marks a signal to a process that does not exist (any more).
var errNoProcess = errors.New("no such process")

// daemons are the long-running processes /spawn started. The agent reaps
// them, so it also remembers them: a signal to one that has exited must not
// reach whatever process reuses its pid.
type daemons struct {
	logger *log.Logger
	mu     sync.Mutex
	procs  map[int]*daemon
}

type daemon struct {
	argv []string
	proc *os.Process
	// exit is the daemon's wait status once reaped; guarded by daemons.mu.
	exit string
}

func newDaemons(logger *log.Logger) *daemons {
	return &daemons{logger: logger, procs: make(map[int]*daemon)}
}

// spawn starts req.Argv detached: a session of its own (so that the agent's
// terminal and process group signals do not reach it), stdin on /dev/null,
// stdout and stderr appended to req.Log.
func (d *daemons) spawn(req vmapi.SpawnRequest) (int, error) {
	logPath := req.Log
	if logPath == "" {
		logPath = os.DevNull
	}
	logFile, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("open log: %w", err)
	}
	// The child has its own copy of the descriptor once started.
	defer logFile.Close()

	cmd := exec.Command(req.Argv[0], req.Argv[1:]...)
	cmd.Env = append(os.Environ(), req.Env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start %q: %w", req.Argv[0], err)
	}
	pid := cmd.Process.Pid
	dm := &daemon{argv: req.Argv, proc: cmd.Process}
	d.mu.Lock()
	d.procs[pid] = dm
	d.mu.Unlock()
	d.logger.Printf("spawned pid %d: %s (log %s)", pid, strings.Join(req.Argv, " "), logPath)

	go func() {
		err := cmd.Wait()
		exit := "exit status 0"
		if err != nil {
			exit = err.Error()
		}
		d.mu.Lock()
		dm.exit = exit
		d.mu.Unlock()
		d.logger.Printf("spawned pid %d (%s) ended: %s", pid, req.Argv[0], exit)
	}()
	return pid, nil
}

// signal sends sig to pid. A daemon of ours is signalled through its
// os.Process, which refuses once it is reaped; any other pid through kill(2).
func (d *daemons) signal(pid int, sig syscall.Signal) error {
	d.mu.Lock()
	dm := d.procs[pid]
	var exit string
	if dm != nil {
		exit = dm.exit
	}
	d.mu.Unlock()
	if exit != "" {
		return fmt.Errorf("signal %v to pid %d (%s): %w: it already ended (%s)", sig, pid, dm.argv[0], errNoProcess, exit)
	}
	var err error
	if dm != nil {
		err = dm.proc.Signal(sig)
		if errors.Is(err, os.ErrProcessDone) {
			err = errNoProcess
		}
	} else {
		err = syscall.Kill(pid, sig)
		if errors.Is(err, syscall.ESRCH) {
			err = errNoProcess
		}
	}
	if err != nil {
		return fmt.Errorf("signal %v to pid %d: %w", sig, pid, err)
	}
	return nil
}

// signalsByName are the signals /signal accepts, by their name without SIG.
var signalsByName = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM,
	"KILL": syscall.SIGKILL,
	"INT":  syscall.SIGINT,
	"HUP":  syscall.SIGHUP,
}

// parseSignal accepts "TERM" and "SIGTERM" alike.
func parseSignal(name string) (syscall.Signal, error) {
	if sig, ok := signalsByName[strings.TrimPrefix(strings.ToUpper(name), "SIG")]; ok {
		return sig, nil
	}
	return 0, fmt.Errorf("unknown signal %q (want TERM, KILL, INT or HUP)", name)
}
