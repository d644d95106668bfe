// SPDX-License-Identifier: Apache-2.0

package vmnode

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// The pieces of TestVMCgroupV2Observe (node_5_vm_test.go, build tag vmnode) that
// need no VM, tested here on every run so they cannot rot unseen.

// guestPod is the kubelet-like pod the guest creates on its cgroup v2 root.
type guestPod struct {
	UID         string // the kubelet's format: a lowercase RFC 4122 UUID
	ContainerID string // 64 hex digits, the container cgroup's name under cgroupfs
	HoldMiB     int
}

func newGuestPod(holdMiB int) guestPod {
	var u [16]byte
	_, _ = rand.Read(u[:])
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // variant RFC 4122
	h := hex.EncodeToString(u[:])
	var c [32]byte
	_, _ = rand.Read(c[:])
	return guestPod{
		UID:         h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32],
		ContainerID: hex.EncodeToString(c[:]),
		HoldMiB:     holdMiB,
	}
}

// observeScript is the guest's script: the kubelet's cgroupfs layout under
// /sys/fs/cgroup/kubepods (cgroup root /), a workload in the pod's container
// cgroup holding p.HoldMiB, then evictd observe on the guest's own /proc and
// /sys, its JSON and exit status written to /out. bin is the directory of
// evictd and workload as the guest sees it (under /host).
func observeScript(bin string, p guestPod) string {
	return fmt.Sprintf(`set -u
bin=%[1]s
cg=/sys/fs/cgroup
pod=$cg/kubepods/burstable/pod%[2]s
ctr=$pod/%[3]s
hold=%[4]d
up() { cut -d' ' -f1 /proc/uptime; }
echo "vmnode: script started at uptime $(up)s"
# What the kubelet (cgroupfs driver, cgroup root /) creates: every level
# passes the controllers down; processes live only in container cgroups.
for d in $cg/kubepods $cg/kubepods/burstable $pod; do
  mkdir -p $d || exit 10
  echo "+memory +pids +cpu +io" > $d/cgroup.subtree_control || exit 11
done
mkdir -p $ctr || exit 12
# nodefs and imagefs: a tmpfs each, as the guest's rootfs is not a disk.
mkdir -p /var/lib/kubelet /var/lib/containerd
mount -t tmpfs -o size=256m tmpfs /var/lib/kubelet
mount -t tmpfs -o size=256m tmpfs /var/lib/containerd
sh -c 'echo $$ >"$1/cgroup.procs" && exec "$2/workload" --hold-mib="$3"' workload "$ctr" "$bin" "$hold" >/out/workload.log 2>&1 &
wl=$!
# Until the pod's usage covers the hold (guest code is ~40x slower).
want=$(( (hold - 2) * 1048576 ))
i=0
while [ "$(cat $pod/memory.current)" -lt "$want" ]; do
  i=$((i + 1))
  if [ $i -gt 1200 ] || ! kill -0 $wl 2>/dev/null; then
    echo "vmnode: the workload did not reach ${hold}MiB (memory.current $(cat $pod/memory.current))"
    cat /out/workload.log
    exit 20
  fi
  sleep 0.1
done
echo "vmnode: pod memory.current $(cat $pod/memory.current) at uptime $(up)s"
t0=$(up)
"$bin/evictd" observe -o json --host-root / --cgroup-root / >/out/observe.json 2>/out/observe.err
echo $? >/out/observe.rc
echo "vmnode: evictd observe exited $(cat /out/observe.rc), from uptime ${t0}s to $(up)s"
"$bin/evictd" observe -o table --host-root / --cgroup-root / 2>&1
cp $pod/memory.stat /out/pod-memory.stat
cp $pod/memory.current /out/pod-memory.current
kill $wl
wait $wl 2>/dev/null
exit 0
`, shellQuote(bin), p.UID, p.ContainerID, p.HoldMiB)
}

// shellQuote quotes s for sh, as one word.

// checkSummary checks evictd's Summary from the guest: the pod is there with
// at least minWorkingSet, and so is the node's memory signal. It returns the
// problems found, none when all is well.
func checkSummary(data []byte, p guestPod, minWorkingSet uint64) (*statsv1alpha1.Summary, []string) {
	var s statsv1alpha1.Summary
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, []string{fmt.Sprintf("evictd observe's output is not a Summary: %v", err)}
	}
	var probs []string
	if m := s.Node.Memory; m == nil || m.AvailableBytes == nil || m.WorkingSetBytes == nil || *m.WorkingSetBytes == 0 {
		probs = append(probs, "the node's memory signal (node.memory.availableBytes, workingSetBytes) is missing")
	}
	var pod *statsv1alpha1.PodStats
	var uids []string
	for i := range s.Pods {
		uids = append(uids, s.Pods[i].PodRef.UID)
		if s.Pods[i].PodRef.UID == p.UID {
			pod = &s.Pods[i]
		}
	}
	switch {
	case pod == nil:
		probs = append(probs, fmt.Sprintf("pod %s not found (pods: [%s])", p.UID, strings.Join(uids, " ")))
	case pod.Memory == nil || pod.Memory.WorkingSetBytes == nil:
		probs = append(probs, fmt.Sprintf("pod %s has no memory working set", p.UID))
	case *pod.Memory.WorkingSetBytes < minWorkingSet:
		probs = append(probs, fmt.Sprintf("pod %s working set %d bytes, want at least %d", p.UID, *pod.Memory.WorkingSetBytes, minWorkingSet))
	}
	return &s, probs
}

func TestObserveScriptAndCheck(t *testing.T) {
	p := newGuestPod(64)
	if len(p.UID) != 36 || strings.Count(p.UID, "-") != 4 || p.UID != strings.ToLower(p.UID) || len(p.ContainerID) != 64 {
		t.Fatalf("bad pod identity %+v", p)
	}
	script := observeScript("/host/it's a repo/_output/bin", p)
	for _, want := range []string{
		`bin='/host/it'\''s a repo/_output/bin'` + "\n",
		"pod=$cg/kubepods/burstable/pod" + p.UID + "\n",
		"ctr=$pod/" + p.ContainerID + "\n",
		`exec "$2/workload" --hold-mib="$3"' workload "$ctr" "$bin" "$hold"`,
		`"$bin/evictd" observe -o json --host-root / --cgroup-root / >/out/observe.json`,
	} {
		if !strings.Contains(script, want) {
			t.Errorf("script lacks %q:\n%s", want, script)
		}
	}

	if out, err := exec.Command("sh", "-n", "-c", script).CombinedOutput(); err != nil {
		t.Errorf("sh -n on the script: %v\n%s", err, out)
	}

	ws, avail := uint64(65<<20), uint64(300<<20)
	good := statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{Memory: &statsv1alpha1.MemoryStats{AvailableBytes: &avail, WorkingSetBytes: &avail}},
		Pods: []statsv1alpha1.PodStats{{PodRef: statsv1alpha1.PodReference{UID: p.UID}, Memory: &statsv1alpha1.MemoryStats{WorkingSetBytes: &ws}}},
	}
	b, _ := json.Marshal(good)
	if _, probs := checkSummary(b, p, 60<<20); len(probs) != 0 {
		t.Errorf("good summary: %v", probs)
	}
	if _, probs := checkSummary(b, p, 70<<20); len(probs) != 1 {
		t.Errorf("small working set: %v, want one problem", probs)
	}
	if _, probs := checkSummary(b, newGuestPod(1), 1); len(probs) != 1 {
		t.Errorf("other pod: %v, want one problem", probs)
	}
	b, _ = json.Marshal(statsv1alpha1.Summary{})
	if _, probs := checkSummary(b, p, 1); len(probs) != 2 {
		t.Errorf("empty summary: %v, want two problems", probs)
	}
}
