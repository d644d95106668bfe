// SPDX-License-Identifier: Apache-2.0

// Package deploy tests what deploy/ ships besides the manifest: the Helm
// chart, the Prometheus alerting rules and the Grafana dashboard.
package deploy

import (
	"os"
	"testing"
)

// TestMain points every HTTP proxy at a closed loopback port before any
// client exists: a library that tried to fetch something from the internet
// (a JSON schema's $schema, say) fails here instead of going out. Loopback
// addresses, where the test API server listens, are never proxied.
func TestMain(m *testing.M) {
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
		os.Setenv(k, "http://127.0.0.1:9")
	}
	os.Unsetenv("NO_PROXY")
	os.Unsetenv("no_proxy")
	os.Exit(m.Run())
}
