// SPDX-License-Identifier: Apache-2.0

package main

import (
	"github.com/evictd/evictd/test/vmnode/vmapi"

	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"strings"
)

// maxRequestBytes bounds a request body; stdin for a command is the only
// large field (a manifest, a script).
const maxRequestBytes = 64 << 20

// newHandler is the agent's HTTP API (see the package comment).
func newHandler(logger *log.Logger) http.Handler {
	d := newDaemons(logger)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok")
	})
	mux.HandleFunc("POST /exec", func(w http.ResponseWriter, r *http.Request) {
		var req vmapi.ExecRequest
		if err := decodeRequest(w, r, &req); err != nil {
			badRequest(w, r, err)
			return
		}
		if err := validateExec(req); err != nil {
			badRequest(w, r, err)
			return
		}
		// A client that gives up (or dies) takes the command with it.
		writeJSON(w, execute(r.Context(), req))
	})
	mux.HandleFunc("POST /spawn", func(w http.ResponseWriter, r *http.Request) {
		var req vmapi.SpawnRequest
		if err := decodeRequest(w, r, &req); err != nil {
			badRequest(w, r, err)
			return
		}
		if err := validateCommand(req.Argv, req.Env); err != nil {
			badRequest(w, r, err)
			return
		}
		pid, err := d.spawn(req)
		if err != nil {
			http.Error(w, oneLine(err), http.StatusInternalServerError)
			return
		}
		writeJSON(w, vmapi.SpawnResponse{PID: pid})
	})
	mux.HandleFunc("POST /signal", func(w http.ResponseWriter, r *http.Request) {
		var req vmapi.SignalRequest
		if err := decodeRequest(w, r, &req); err != nil {
			badRequest(w, r, err)
			return
		}
		sig, err := parseSignal(req.Signal)
		if err == nil && req.PID <= 0 {
			// kill(2) reads 0 and negative pids as process groups.
			err = fmt.Errorf("pid %d is not a process id", req.PID)
		}
		if err != nil {
			badRequest(w, r, err)
			return
		}
		if err := d.signal(req.PID, sig); err != nil {
			status := http.StatusInternalServerError
			if errors.Is(err, errNoProcess) {
				status = http.StatusNotFound
			}
			http.Error(w, oneLine(err), status)
			return
		}
		writeJSON(w, vmapi.SignalResponse(req))
	})
	return mux
}

func validateExec(req vmapi.ExecRequest) error {
	if req.TimeoutSeconds < 0 {
		return fmt.Errorf("timeoutSeconds %v is negative", req.TimeoutSeconds)
	}
	return validateCommand(req.Argv, req.Env)
}

func validateCommand(argv, env []string) error {
	if len(argv) == 0 || argv[0] == "" {
		return errors.New("argv is empty")
	}
	for _, kv := range env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("env entry %q is not K=V", kv)
		}
	}
	return nil
}

// decodeRequest reads exactly one JSON object and refuses unknown fields, so
// that a misspelt field is an error instead of a silently ignored option.
func decodeRequest(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("unexpected data after the JSON object")
	}
	return nil
}

func badRequest(w http.ResponseWriter, r *http.Request, err error) {
	http.Error(w, "bad "+r.URL.Path+" request: "+oneLine(err), http.StatusBadRequest)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	// The status line is already sent when encoding fails; nothing to add.
	_ = json.NewEncoder(w).Encode(v)
}

// oneLine keeps an error message on one line, as the API promises.
func oneLine(err error) string {
	return strings.Join(strings.FieldsFunc(err.Error(), func(r rune) bool { return r == '\n' || r == '\r' }), " ")
}
