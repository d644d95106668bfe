// SPDX-License-Identifier: Apache-2.0

package config

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// --eviction-request (docs/evictionrequest.md): evictd's own flags, and the
// file's evictionRequest and evictionRequestResponderWait. The config owns
// them, as it owns every setting that is a field of the file too, so that a
// flag given overrides the file and one not given leaves it.
const (
	FlagEvictionRequest     = "eviction-request"
	FlagEvictionRequestWait = "eviction-request-responder-wait"
)

// DefaultEvictionRequestResponderWait: a soft eviction's own grace period
// is what the operator allowed a pod to shut down in; a responder (a live
// migration, a drain) gets a minute to start that before the pressure it
// was asked to relieve is relieved the plain way.
const DefaultEvictionRequestResponderWait = time.Minute

// The responder wait's bounds: under a second is no wait at all for an API
// round trip; past an hour the pressure the request was made for has long
// been someone else's problem (the kubelet's, the OOM killer's).
const (
	MinEvictionRequestResponderWait = time.Second
	MaxEvictionRequestResponderWait = time.Hour
)

// evictReqFlags are the two flags, each applied only when given.
type evictReqFlags struct {
	on         bool
	wait       time.Duration
	onF, waitF *pflag.Flag
}

func (e *evictReqFlags) bind(fs *pflag.FlagSet) {
	fs.BoolVar(&e.on, FlagEvictionRequest, false,
		"Ask for soft evictions with a lifecycle.k8s.io/v1alpha1 EvictionRequest (Kubernetes 1.37 alpha, feature gate EvictionRequestAPI), so that the pod's eviction responders can act; hard evictions and pods already terminating stay on the Eviction API. Needs the evictionrequests RBAC rule (overrides evictionRequest of --config).")
	fs.DurationVar(&e.wait, FlagEvictionRequestWait, DefaultEvictionRequestResponderWait,
		"With --"+FlagEvictionRequest+": how long a pod may stay after its EvictionRequest before evictd evicts it through the Eviction API, within 1s..1h (overrides evictionRequestResponderWait of --config).")
	e.onF, e.waitF = fs.Lookup(FlagEvictionRequest), fs.Lookup(FlagEvictionRequestWait)
}

// apply overrides c's fields with the flags given.
func (e *evictReqFlags) apply(c *Config) {
	if e.onF != nil && e.onF.Changed {
		c.EvictionRequest = e.on
	}
	if e.waitF != nil && e.waitF.Changed {
		c.EvictionRequestResponderWait = &metav1.Duration{Duration: e.wait}
	}
}

// ResponderWait is evictionRequestResponderWait, defaulted.
func (c *Config) ResponderWait() time.Duration {
	if c.EvictionRequestResponderWait == nil {
		return DefaultEvictionRequestResponderWait
	}
	return c.EvictionRequestResponderWait.Duration
}

// validateEvictionRequest names a responder wait out of bounds. A wait set
// without the mode is accepted, as the flag always was: it tunes nothing.
func (c *Config) validateEvictionRequest() error {
	if w := c.ResponderWait(); w < MinEvictionRequestResponderWait || w > MaxEvictionRequestResponderWait {
		return fmt.Errorf("evictionRequestResponderWait %s (--%s) must be within %s..%s", w, FlagEvictionRequestWait,
			MinEvictionRequestResponderWait, MaxEvictionRequestResponderWait)
	}
	return nil
}
