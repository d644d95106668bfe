// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The API server's audit log is the only place that stamps when a request
// arrived with sub-second precision: a pod's deletionTimestamp has whole
// seconds, and evictd's own log line is written after the response. The
// policy below logs pods/eviction creates at Metadata level, once each
// (at ResponseComplete, which still carries requestReceivedTimestamp), and
// nothing else.
const evictionAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  verbs: ["create"]
  resources:
  - group: ""
    resources: ["pods/eviction"]
- level: None
`

// AuditedEviction is one pods/eviction create the API server answered.
type AuditedEviction struct {
	Namespace, Name string
	User            string
	// Code is the HTTP status of the answer (201 accepted, 429 refused).
	Code int
	// Received is requestReceivedTimestamp (microseconds).
	Received time.Time
	// Completed is stageTimestamp of the ResponseComplete stage.
	Completed time.Time
	// DryRun is true for a server-side dry run (dryRun=All in the URI).
	DryRun bool
}

// auditEvent is the part of an audit.k8s.io/v1 Event that is read here
// (ParseAuditEvictions, ParseAuditRequests).
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	Verb       string `json:"verb"`
	RequestURI string `json:"requestURI"`
	User       struct {
		Username string              `json:"username"`
		Extra    map[string][]string `json:"extra"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		APIGroup    string `json:"apiGroup"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	RequestReceivedTimestamp string `json:"requestReceivedTimestamp"`
	StageTimestamp           string `json:"stageTimestamp"`
}

// ParseAuditEvictions reads a JSON-lines audit log and returns its
// completed pods/eviction creates, in log order. Other events are skipped; a
// line that is not an audit event is an error naming its line number.
func ParseAuditEvictions(r io.Reader) ([]AuditedEviction, error) {
	var out []AuditedEviction
	err := eachAuditEvent(r, func(n int, ev auditEvent) error {
		if ev.Stage != "ResponseComplete" || ev.Verb != "create" || ev.ObjectRef == nil ||
			ev.ObjectRef.Resource != "pods" || ev.ObjectRef.Subresource != "eviction" {
			return nil
		}
		received, err := time.Parse(time.RFC3339Nano, ev.RequestReceivedTimestamp)
		if err != nil {
			return fmt.Errorf("audit log line %d: requestReceivedTimestamp %q: %w", n, ev.RequestReceivedTimestamp, err)
		}
		completed, err := time.Parse(time.RFC3339Nano, ev.StageTimestamp)
		if err != nil {
			return fmt.Errorf("audit log line %d: stageTimestamp %q: %w", n, ev.StageTimestamp, err)
		}
		e := AuditedEviction{
			Namespace: ev.ObjectRef.Namespace,
			Name:      ev.ObjectRef.Name,
			User:      ev.User.Username,
			Received:  received,
			Completed: completed,
			DryRun:    strings.Contains(ev.RequestURI, "dryRun=All"),
		}
		if ev.ResponseStatus != nil {
			e.Code = ev.ResponseStatus.Code
		}
		out = append(out, e)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachAuditEvent calls fn with each event of a JSON-lines audit log and
// its line number, skipping blank lines; a line that is not JSON, or an
// error of fn, ends it.
func eachAuditEvent(r io.Reader, fn func(n int, ev auditEvent) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		var ev auditEvent
		if err := json.Unmarshal(line, &ev); err != nil {
			return fmt.Errorf("audit log line %d: %w", n, err)
		}
		if err := fn(n, ev); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	return nil
}

// ReadAuditEvictions parses the audit log file at path (see
// ParseAuditEvictions). A log not written yet holds no evictions.
func ReadAuditEvictions(path string) ([]AuditedEviction, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return ParseAuditEvictions(f)
}

// requestAuditPolicy logs every request at Metadata level (sender with its
// user-info extras, verb, resource, answer, timestamps; no bodies), once when
// it completes and, for a watch, once more when it starts, so that the scale
// benchmark can count each sender's requests and its open watches.
const requestAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
`

// AuditBinDir makes dir a binary directory for framework.Config.BinDir in
// which kube-apiserver writes the eviction audit log to logPath: the other
// binaries of binDir are linked in, and kube-apiserver is a script that
// execs the real one with the audit flags appended. The test framework
// passes no extra API server flags, and a wrapper keeps the benchmark from
// needing one. exec keeps the PID, so the framework still stops the real
// server by its process group.
func AuditBinDir(dir, binDir, logPath string) error {
	return auditBinDir(dir, binDir, logPath, evictionAuditPolicy)
}

// RequestAuditBinDir is AuditBinDir with every request in the audit log
// (requestAuditPolicy), for ParseAuditRequests.
func RequestAuditBinDir(dir, binDir, logPath string) error {
	return auditBinDir(dir, binDir, logPath, requestAuditPolicy)
}

func auditBinDir(dir, binDir, logPath, auditPolicy string) error {
	entries, err := os.ReadDir(binDir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") || e.Name() == "kube-apiserver" {
			continue
		}
		if err := os.Symlink(filepath.Join(binDir, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	real := filepath.Join(binDir, "kube-apiserver")
	if _, err := os.Stat(real); err != nil {
		return err
	}
	policy := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o600); err != nil {
		return err
	}
	script := "#!/bin/sh\nexec " + shellQuote(real) + ` "$@"` +
		" --audit-policy-file=" + shellQuote(policy) +
		" --audit-log-path=" + shellQuote(logPath) +
		// Blocking: the event is written before the response, so it is in
		// the file by the time the client (and the test) sees the answer.
		" --audit-log-mode=blocking --audit-log-format=json --audit-log-maxbackup=1" +
		// One file for the whole run: without a size the API server rotates
		// at 100 MB, and a busy scale run writes more.
		" --audit-log-maxsize=100000\n"
	return os.WriteFile(filepath.Join(dir, "kube-apiserver"), []byte(script), 0o755)
}

// shellQuote quotes s for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
