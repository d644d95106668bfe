// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// killOnLineScript runs in the guest: it waits (up to $4 polls, 0.2 s
// apart) until evictd's container log $1 has one more line holding both $2
// and $3 than when it started, then SIGKILLs every process named $5 and
// prints "killed PID... at TIME", the time on the guest's clock (evictd's
// and the CRI log's), taken after the kill; "not seen" and exit 1 at the
// end of its polls. The kill is the guest's reaction to evictd's own line,
// a poll interval or so on the loaded guest: a host polling the log through
// the agent took 8-20 s, past a 20 s grace period (issue 60).
const killOnLineScript = `log=$1 a=$2 b=$3 polls=$4 name=$5
count() { grep -F -- "$a" "$log" 2>/dev/null | grep -cF -- "$b"; }
before=$(count)
i=0
while [ "$(count)" -le "$before" ]; do
  i=$((i+1))
  if [ "$i" -gt "$polls" ]; then echo "not seen"; exit 1; fi
  sleep 0.2
done
killed=
for d in /proc/[0-9]*; do
  if [ "$(cat $d/comm 2>/dev/null)" = "$name" ]; then kill -KILL ${d#/proc/} && killed="$killed ${d#/proc/}"; fi
done
echo "killed$killed at $(date -u +%Y-%m-%dT%H:%M:%S.%NZ)"`

// killOnLineArgv is the guest command line of killOnLineScript for a log
// file, the two strings its line must hold, how long it waits at most and
// the name (comm) of the processes it kills.
func killOnLineArgv(log, a, b string, wait time.Duration, name string) []string {
	return []string{"/bin/sh", "-c", killOnLineScript, "sh", log, a, b, strconv.Itoa(int(wait / (200 * time.Millisecond))), name}
}

// parseKilled reads killOnLineScript's last line: the PIDs it killed and
// when (guest clock).
func parseKilled(out string) (pids []string, at time.Time, err error) {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	rest, ok := strings.CutPrefix(last, "killed")
	if !ok {
		return nil, time.Time{}, fmt.Errorf("the guest's kill: %q", out)
	}
	list, ts, ok := strings.Cut(rest, " at ")
	if !ok {
		return nil, time.Time{}, fmt.Errorf("the guest's kill: no time in %q", last)
	}
	if at, err = time.Parse(time.RFC3339Nano, strings.TrimSpace(ts)); err != nil {
		return nil, time.Time{}, fmt.Errorf("the guest's kill: %q: %w", last, err)
	}
	return strings.Fields(list), at, nil
}
