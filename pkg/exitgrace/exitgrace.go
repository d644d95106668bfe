// SPDX-License-Identifier: Apache-2.0

// Package exitgrace is the agent's exit budget: the termination grace its
// pod gets (the chart and deploy/daemonset.yaml set it; test/deploy holds
// both to TerminationGrace) and the bounds of the exit work that must fit
// in it, or the kubelet kills the agent in the middle of lifting its node
// brake.
package exitgrace

import "time"

// TerminationGrace is the agent pod's terminationGracePeriodSeconds.
const TerminationGrace = 60 * time.Second

// LeaseRelease bounds the node lease's release, the last of the exit work.
const LeaseRelease = 5 * time.Second

// Slack is the part of the grace kept for the exit work that is neither
// the lift nor the release: the eviction call under way, the HTTP
// servers' shutdown, the process's exit. The Events' flush runs beside the
// lift.
const Slack = 10 * time.Second

// BrakeLift bounds the node brake's lift at exit, retries included: what
// the grace leaves after the release, which follows the lift, and Slack.
const BrakeLift = TerminationGrace - LeaseRelease - Slack
