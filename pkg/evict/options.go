// SPDX-License-Identifier: Apache-2.0

package evict

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
)

// PDBPolicy says what to do when every eligible pod is protected by a
// PodDisruptionBudget while a hard threshold is met.
type PDBPolicy string

const (
	// PDBStrict never evicts past a PodDisruptionBudget (the default).
	PDBStrict PDBPolicy = "strict"
	// PDBBestEffort allows Evictor.ForceDelete: "PDB is supported, but not
	// guaranteed", as the scheduler's preemption puts it.
	PDBBestEffort PDBPolicy = "best-effort"
)

// DefaultPodGracePeriod is what the API server fills in when a pod has no
// terminationGracePeriodSeconds; evictd assumes the same.
const DefaultPodGracePeriod int64 = 30

// NoGraceCap is a MaxPodGracePeriod that caps nothing: every pod evicted for
// a soft threshold gets its own terminationGracePeriodSeconds, which is what
// evictd's --eviction-max-pod-grace-period=0 means (not the kubelet's 0,
// which gives the pod 1 s). A cap rather than a special value keeps
// GracePeriod one formula; 2^31-1 seconds (68 years) is more than any pod
// asks for.
const NoGraceCap int64 = math.MaxInt32

// Options are the evictor's settings, one flag each. Start from Defaults,
// then Validate before use.
type Options struct {
	// DryRun sends every eviction as a server-side dry run (DryRun=All):
	// the PodDisruptionBudget verdict is real and nothing is written,
	// Events included.
	DryRun bool
	// PDBPolicy: strict or best-effort; see PDBPolicy.
	PDBPolicy PDBPolicy
	// MaxPodGracePeriod caps the grace period, in seconds, of evictions for
	// soft thresholds; NoGraceCap, the default, leaves each pod its own. It
	// has no flag here: --eviction-max-pod-grace-period, the kubelet's name,
	// is pkg/config's (it is a field of the file too), and the agent copies
	// it in, turning its 0, "the pod's own", into NoGraceCap. (The
	// kubelet's 0 is 1 s: its pod worker raises a grace override below 1 s
	// to 1 s instead of falling back to the pod's own, 1.37.)
	MaxPodGracePeriod int64
	// HardGracePeriod caps the grace period, in seconds, of evictions for
	// hard thresholds.
	HardGracePeriod int64
	// Rate and Burst are each pressure episode's token bucket (one per
	// resource, see Budget): at most Burst evictions at once and Rate per
	// second over time.
	Rate  float64
	Burst int
	// MaxPerEpisode caps evictions per pressure episode (reset with
	// Evictor.ResetEpisode when pressure ends).
	MaxPerEpisode int
	// CallTimeout bounds each API call, client-go's own retries included.
	CallTimeout time.Duration
}

// Defaults returns the default options. Why these values:
//   - no soft grace cap (NoGraceCap): a soft threshold leaves time, so a pod
//     evicted for one gets its own terminationGracePeriodSeconds (the
//     kubelet's --eviction-max-pod-grace-period of 0, its default, gives it
//     1 s, as for a hard threshold);
//   - hard grace cap 5 s: a hard threshold means the node is close to the
//     OOM killer; 5 s lets most SIGTERM handlers flush and exit, where the
//     kubelet's own 1 s (2 s per container once its runtime manager applies
//     its minimum) often cuts them short;
//   - 1 eviction per second, burst 1: the agent already waits for each
//     victim's memory to come back before it evicts again, so this limit
//     never slows a healthy loop; it is the backstop against a loop that
//     goes wrong (stale stats, pods that vanish at once), while still
//     letting a hard threshold escalate past a slow soft eviction within a
//     second;
//   - 10 evictions per episode: more than one pressure episode should ever
//     need on a node, few enough that a bug cannot empty it.
func Defaults() Options {
	return Options{
		PDBPolicy:         PDBStrict,
		MaxPodGracePeriod: NoGraceCap,
		HardGracePeriod:   5,
		Rate:              1,
		Burst:             1,
		MaxPerEpisode:     10,
		CallTimeout:       10 * time.Second,
	}
}

// Flag names, for error messages and the README.
const (
	FlagDryRun    = "dry-run"
	FlagPDBPolicy = "pdb-policy"
	// FlagMaxPodGracePeriod is registered by pkg/config; Validate names it.
	FlagMaxPodGracePeriod = "eviction-max-pod-grace-period"
	FlagHardGracePeriod   = "eviction-hard-grace-period"
	FlagRate              = "eviction-rate"
	FlagBurst             = "eviction-burst"
	FlagMaxPerEpisode     = "eviction-max-per-episode"
	FlagCallTimeout       = "eviction-api-timeout"
)

// AddFlags registers the options on fs, with o's current values as
// defaults; MaxPodGracePeriod excepted (see its field).
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.DryRun, FlagDryRun, o.DryRun,
		"Send every eviction as a server-side dry run: log what would be evicted and the PodDisruptionBudget verdict, change nothing.")
	fs.Var((*pdbPolicyValue)(&o.PDBPolicy), FlagPDBPolicy, fmt.Sprintf("What to do when every eligible pod is PDB-blocked under a hard threshold: %s (never evict past a PDB) or %s (delete the first one anyway, loudly).", PDBStrict, PDBBestEffort))
	fs.Int64Var(&o.HardGracePeriod, FlagHardGracePeriod, o.HardGracePeriod,
		"Longest grace period, in seconds, given to a pod evicted for a hard threshold: min(pod's terminationGracePeriodSeconds, this). At least 1.")
	fs.Float64Var(&o.Rate, FlagRate, o.Rate, "Evictions per second over time (token bucket rate), per pressure episode: each resource (memory, memory stall, nodefs, imagefs, PIDs) has its own bucket.")
	fs.IntVar(&o.Burst, FlagBurst, o.Burst, "Evictions at once (token bucket size), per pressure episode, like --eviction-rate.")
	fs.IntVar(&o.MaxPerEpisode, FlagMaxPerEpisode, o.MaxPerEpisode, "Most evictions in one pressure episode; the count restarts when pressure ends.")
	fs.DurationVar(&o.CallTimeout, FlagCallTimeout, o.CallTimeout, "Time limit for each eviction API call.")
}

// pdbPolicyValue is --pdb-policy: one of the PDBPolicy constants.
type pdbPolicyValue PDBPolicy

func (v *pdbPolicyValue) Set(s string) error {
	p := PDBPolicy(s)
	if p != PDBStrict && p != PDBBestEffort {
		return fmt.Errorf("want %s or %s", PDBStrict, PDBBestEffort)
	}
	*v = pdbPolicyValue(p)
	return nil
}

func (v *pdbPolicyValue) String() string { return string(*v) }

func (v *pdbPolicyValue) Type() string { return "string" }

// Validate reports every bad option at once, each naming its flag and value.
func (o Options) Validate() error {
	var errs []error
	if o.PDBPolicy != PDBStrict && o.PDBPolicy != PDBBestEffort {
		errs = append(errs, fmt.Errorf("invalid --%s %q (want %s or %s)", FlagPDBPolicy, o.PDBPolicy, PDBStrict, PDBBestEffort))
	}
	// 0 is refused rather than given a meaning: the API server treats a
	// grace period of 0 as an immediate force delete, and the kubelet
	// raises an override of 0 to 1 s (1.37; before, it fell back to the
	// pod's full grace period), so either reading would surprise someone.
	if o.MaxPodGracePeriod < 1 {
		errs = append(errs, fmt.Errorf("invalid --%s %d: must be at least 1 second (evictd never sends a grace period of 0)", FlagMaxPodGracePeriod, o.MaxPodGracePeriod))
	}
	if o.HardGracePeriod < 1 {
		errs = append(errs, fmt.Errorf("invalid --%s %d: must be at least 1 second (evictd never sends a grace period of 0)", FlagHardGracePeriod, o.HardGracePeriod))
	}
	if !(o.Rate > 0) { // also catches NaN
		errs = append(errs, fmt.Errorf("invalid --%s %v: must be more than 0", FlagRate, o.Rate))
	}
	if o.Burst < 1 {
		errs = append(errs, fmt.Errorf("invalid --%s %d: must be at least 1", FlagBurst, o.Burst))
	}
	if o.MaxPerEpisode < 1 {
		errs = append(errs, fmt.Errorf("invalid --%s %d: must be at least 1", FlagMaxPerEpisode, o.MaxPerEpisode))
	}
	if o.CallTimeout <= 0 {
		errs = append(errs, fmt.Errorf("invalid --%s %v: must be more than 0", FlagCallTimeout, o.CallTimeout))
	}
	return errors.Join(errs...)
}

// GracePeriod is the grace period, in seconds, evictd sends when evicting
// pod for a hard or soft threshold:
//
//	asked    = pod.spec.terminationGracePeriodSeconds, or 30 when unset
//	cap      = HardGracePeriod (hard) or MaxPodGracePeriod (soft)
//	cap      = min(cap, *override)             when override is given
//	grace    = max(1, min(asked, cap))
//
// A pod never gets more than it asked for, an override can only shorten the
// grace (the fast path fits it to the time the node has left), and the
// result is never 0: the API server would turn 0 into an immediate force
// delete, skipping the graceful stop, so 1 second is the shortest grace
// (the kubelet's own hard evictions use 1 too).
func (o Options) GracePeriod(pod *v1.Pod, hard bool, override *int64) int64 {
	asked := DefaultPodGracePeriod
	if pod != nil && pod.Spec.TerminationGracePeriodSeconds != nil {
		asked = *pod.Spec.TerminationGracePeriodSeconds
	}
	limit := o.MaxPodGracePeriod
	if hard {
		limit = o.HardGracePeriod
	}
	if override != nil && *override < limit {
		limit = *override
	}
	return max(1, min(asked, limit))
}
