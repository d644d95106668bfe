// SPDX-License-Identifier: Apache-2.0

//go:build tools

// The helm command (make's $(TOOLS)/helm) is built from this module, at the Helm version the
// chart tests render with; this import keeps its packages' requirements in go.mod and go.sum.
package deploy

import (
	_ "helm.sh/helm/v3/cmd/helm"
)
