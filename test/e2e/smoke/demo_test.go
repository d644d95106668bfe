// SPDX-License-Identifier: Apache-2.0

package smoke

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/evictd/evictd/test/e2e/framework"
)

// demoTimeout bounds `make demo` with its binaries built: the story takes
// about half a minute; a loaded 2-core machine gets twenty times that.
const demoTimeout = 10 * time.Minute

// TestMakeDemo runs the README's main command, `make demo`, as written, from
// the repository's root. hack/demo.sh runs the demo with --verify, so it
// exits non-zero unless the story held: the leak evicted through the
// Eviction API and gone, the protected pods kept, no OOM kill, evictd's
// brake on during the episode and lifted at its clean exit. The test then
// reads the narration for each part of that story and the log the demo says
// it keeps, after the demo has ended.
func TestMakeDemo(t *testing.T) {
	framework.RequireRoot(t)
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "make", "demo")
	cmd.Dir = root
	cmd.WaitDelay = 30 * time.Second
	b, err := cmd.CombinedOutput()
	out := string(b)
	if err != nil {
		t.Fatalf("make demo: %v; its output:\n%s", err, out)
	}
	var missing []string
	for _, want := range []string{
		"the shipped admission policy lets evictd write its brake on this Node only",
		"evictd: EVICTED demo/memory-leak",
		"rank: it uses more than it requests, at priority 10000",
		"evictd: node brake on: taint evictd.io/memory-pressure:PreferNoSchedule",
		"evictd: node brake lifted",
		"Verified: evictd evicted memory-leak",
		"The demo's logs are kept in _output/demo: ",
	} {
		if !strings.Contains(out, want) {
			missing = append(missing, want)
		}
	}
	if len(missing) > 0 {
		t.Errorf("make demo's output lacks %q; it was:\n%s", missing, out)
	}
	m := regexp.MustCompile(`Its log is kept in (\S+)\.\n`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("make demo does not say where it keeps evictd's log; its output:\n%s", out)
	}
	log, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatalf("the log the demo says it keeps: %v", err)
	}
	if !strings.Contains(string(log), `"msg":"evicted pod"`) || !strings.Contains(string(log), `"pod":"demo/memory-leak"`) {
		t.Errorf("%s does not hold the demo's evictions:\n%s", m[1], log)
	}
	if filepath.Dir(m[1]) != filepath.Join(root, "_output", "demo") {
		t.Errorf("evictd's log is kept in %s, not in _output/demo as the demo says at its end", m[1])
	}
}
