// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// killOnLineScript runs in the guest: it follows evictd's container log $1
// from its end (tail -F, inotify), and at the first new line holding both
// $2 and $3 SIGKILLs every process named $5 and prints "killed PID... at
// TIME", the time on the guest's clock (evictd's and the CRI log's), taken
// after the kill; "not seen" and exit 1 after $4 seconds without. Only
// shell builtins run per line and for the kill: on the guest under memory
// pressure each new process reads its binary over 9p, and a loop of grep
// and sleep took 9 s to react. The kill is the guest's reaction to
// evictd's own line: a host polling the log through the agent took 8-20 s,
// past a 20 s grace period (issue 60).
const killOnLineScript = `log=$1 a=$2 b=$3 secs=$4 name=$5
dir=$(mktemp -d) || exit 1
mkfifo "$dir/lines" || exit 1
tail -n0 -F "$log" >"$dir/lines" 2>/dev/null &
tailpid=$!
( sleep "$secs"; kill $tailpid ) >/dev/null 2>&1 &
sleeper=$!
seen=
while IFS= read -r line; do
  case $line in *"$a"*) case $line in *"$b"*) seen=1; break ;; esac ;; esac
done <"$dir/lines"
kill $sleeper 2>/dev/null
if [ -z "$seen" ]; then rm -rf "$dir"; echo "not seen"; exit 1; fi
killed=
for d in /proc/[0-9]*; do
  comm=
  read -r comm <"$d/comm" 2>/dev/null
  if [ "$comm" = "$name" ]; then kill -KILL ${d#/proc/} && killed="$killed ${d#/proc/}"; fi
done
now=$(date -u +%Y-%m-%dT%H:%M:%S.%NZ)
kill $tailpid 2>/dev/null
rm -rf "$dir"
echo "killed$killed at $now"`

// killOnLineArgv is the guest command line of killOnLineScript for a log
// file, the two strings its line must hold, how long it waits at most and
// the name (comm) of the processes it kills.
func killOnLineArgv(log, a, b string, wait time.Duration, name string) []string {
	return []string{"/bin/sh", "-c", killOnLineScript, "sh", log, a, b, strconv.Itoa(max(int(wait.Seconds()), 1)), name}
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
