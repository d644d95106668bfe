// SPDX-License-Identifier: Apache-2.0

package agent

// The state the loop keeps across passes, grouped by what it is for.

import (
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/agent/episode"
	"github.com/evictd/evictd/pkg/agent/imagegc"
	"github.com/evictd/evictd/pkg/agent/leadtime"
	"github.com/evictd/evictd/pkg/predict"
	"github.com/evictd/evictd/pkg/thresholds"
	"github.com/evictd/evictd/pkg/trace"
)

// learned is what the loop has learned of the node across passes.
type learned struct {
	// estimates are the memory signals' fill rates.
	estimates map[thresholds.Signal]*predict.Estimator
	lead      *leadtime.Lead
	// imageGC is the kubelet's chance at each disk signal's unused
	// images, counted as its reclaim while the threshold holds
	// (nodeReclaim).
	imageGC *imagegc.Chance
	// imageAges is when each of the node's images was first listed (with
	// ExpectImageGC): the kubelet keeps young ones.
	imageAges imagegc.Ages
	// pace is the adaptive poll's state.
	pace pacing
}

// held are the pods and episodes the loop holds back or follows up across
// passes.
type held struct {
	// refused are the pods whose eviction the API server refused for the
	// pod itself (an admission policy or webhook, several PDBs), and when.
	refused map[types.UID]time.Time
	// ended are the episodes that ended with a call under way (a
	// withdrawn EvictionRequest, a slow API server): until it answers, its
	// pod stays in the in-flight view, so that no later episode calls it
	// again (lateAnswer).
	ended []*episode.Episode
	// rewalk are the pods whose disk figures a disk decision found older
	// than its episode: the next pass walks them first (rewalkDisk).
	rewalk []string
}

// inbox is what other goroutines hand the loop, taken at a pass's start.
type inbox struct {
	// calls are the eviction calls' answers.
	calls callQueue
	// gone are the pods in flight whose deletion was taken (takeDeletions).
	gone goneQueue
	// deleted are the informer's deletions.
	deleted queue[trace.Deletion]
	// swap brings thresholds placed anew into the loop (retune.go).
	swap thresholdSwap
}

// published is what the loop shows other goroutines.
type published struct {
	health health
	// explained is the last pass's explanation for /explain (publishExplanation).
	explained atomic.Pointer[explainState]
	// explainedLine is the last explanation logged (logExplained).
	explainedLine string
}
