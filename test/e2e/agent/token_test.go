// SPDX-License-Identifier: Apache-2.0

package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/evictd/evictd/test/e2e/framework"
	"github.com/evictd/evictd/test/nodesim"
)

// jwtLifetime is exp - iat of a JWT, read from its payload (no signature
// check: the API server that issued it is the test's own).
func jwtLifetime(t *testing.T, token string) time.Duration {
	t.Helper()
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		t.Fatalf("a token of %d parts, not a JWT", len(parts))
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatalf("JWT payload: %v", err)
	}
	var claims struct {
		Exp, Iat int64
	}
	if err := json.Unmarshal(payload, &claims); err != nil || claims.Exp == 0 || claims.Iat == 0 {
		t.Fatalf("JWT claims %s: %v", payload, err)
	}
	return time.Duration(claims.Exp-claims.Iat) * time.Second
}

// TestTokenExpiration: on a real API server with its default
// --service-account-extend-token-expiration (true), a TokenRequest bound
// to a pod for 3607 s, what the API server's admission asks for a pod that
// mounts its token automatically, gives a token valid for a year (exp -
// iat in the JWT), though its status says an hour; one for 3600 s, what
// evictd's pods ask for (TestShippedTokenLastsAnHour in test/deploy holds
// the manifests to it), gives a token valid 3600 s, as its status says.
func TestTokenExpiration(t *testing.T) {
	c := framework.Start(t)
	node := c.StartNode(t, nodesim.Options{Name: "token", MemoryBytes: nodeMemory})
	c.EvictdNodeToken(t, node.Name) // creates evictd's stand-in pod on the node
	ctx := context.Background()
	sa := c.EvictdServiceAccount
	pod, err := c.Admin.CoreV1().Pods(sa.Namespace).Get(ctx, "evictd-"+node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		requested int64
		want      time.Duration
	}{
		{3607, 365 * 24 * time.Hour},
		{3600, time.Hour},
	} {
		tr, err := c.Admin.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: ptr.To(tc.requested),
				BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("TokenRequest of %d s bound to pod %s/%s: %v", tc.requested, pod.Namespace, pod.Name, err)
		}
		got := jwtLifetime(t, tr.Status.Token)
		status := time.Until(tr.Status.ExpirationTimestamp.Time).Round(time.Minute)
		t.Logf("requested %d s: the JWT is valid %s (exp - iat); the status says it expires in %s", tc.requested, got, status)
		if got != tc.want {
			t.Errorf("a TokenRequest of %d s bound to a pod gives a token valid %s (exp - iat); want %s", tc.requested, got, tc.want)
		}
	}
}
