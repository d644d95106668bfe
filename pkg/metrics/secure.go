// SPDX-License-Identifier: Apache-2.0

package metrics

import "github.com/prometheus/client_golang/prometheus"

// Reasons the secure port refuses a request before it costs the API server
// a review (cmd/evictd/app's secure port, pkg/authdelegate).
const (
	SecureRefusedInFlight     = "in-flight"
	SecureRefusedTokenReviews = "token-reviews" // authdelegate.ReasonReviewRate
)

// SecureRefusedReasons are the values of evictd_secure_refused_total's
// reason label, each with a series from the start.
var SecureRefusedReasons = []string{SecureRefusedInFlight, SecureRefusedTokenReviews}

func (m *Metrics) initSecure() {
	m.secureRefused = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Subsystem: "secure", Name: "refused_total",
		Help: "Requests the secure port answered 429 without serving or asking the API server, by reason: in-flight (as many requests already being served as it serves at once) or token-reviews (a token evictd has no cached answer for, past its bound on TokenReviews). A steady rise is a caller, or an attacker, sending fresh tokens or too many requests at once.",
	}, []string{"reason"})
	for _, r := range SecureRefusedReasons {
		m.secureRefused.WithLabelValues(r)
	}
	m.own = append(m.own, m.secureRefused)
}

// SecureRefused counts a request the secure port refused for reason.
func (m *Metrics) SecureRefused(reason string) {
	if m == nil {
		return
	}
	m.secureRefused.WithLabelValues(reason).Inc()
}
