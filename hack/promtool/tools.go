// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package tools pins promtool, whose `promtool test rules` runs the alerting
// rules' unit tests (deploy/monitoring/tests) in test/deploy. It is a module
// of its own so that neither the main module nor test/deploy takes on
// promtool's service discovery dependencies.
package tools

import (
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
