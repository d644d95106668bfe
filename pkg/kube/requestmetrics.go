// SPDX-License-Identifier: Apache-2.0

package kube

import (
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// RequestMetrics is told of every request a Client sends to the API
// server, so that an operator sees what evictd asks of it (the kubelet's
// rest_client_requests_total and rest_client_request_duration_seconds are
// the model, by verb and resource instead of URL). *metrics.Metrics is one.
type RequestMetrics interface {
	// APIRequest counts one request, each attempt of a retried call on
	// its own: its verb (VerbWatch for a watch), its resource ("pods",
	// "pods/eviction"; ResourceOther outside the resource API) and the
	// answer's HTTP status code, or CodeNoAnswer.
	APIRequest(verb, resource, code string)
	// APIRequestDuration observes a request's time from being sent to the
	// end of its answer's body (or to the error that left it unanswered).
	// Never called for a watch: a watch's answer lasts until the watch
	// ends, minutes later, and would say nothing of the API server's
	// latency.
	APIRequestDuration(verb, resource string, took time.Duration)
}

// Values of RequestMetrics' labels that are not the API's own.
const (
	// CodeNoAnswer is the code of a request that got no HTTP answer: the
	// connection refused or cut, a timeout, a TLS failure.
	CodeNoAnswer = "error"
	// ResourceOther is the resource of a request outside the resource API
	// (/api/v1/... or /apis/GROUP/VERSION/...): evictd's Client sends none.
	ResourceOther = "other"
	// VerbWatch is a watch's verb. An informer's initial list is a watch
	// too where the API server serves streaming lists (sendInitialEvents),
	// as the API server's own apiserver_request_total counts it.
	VerbWatch = "watch"
)

// Option configures NewForConfig.
type Option func(*clientOptions)

type clientOptions struct {
	metrics RequestMetrics
	clock   clock.PassiveClock
}

// WithRequestMetrics tells m of every request the Client sends.
func WithRequestMetrics(m RequestMetrics) Option {
	return func(o *clientOptions) { o.metrics = m }
}

// countingTransport tells metrics of every request that passes through it:
// the one HTTP transport under all of a Client's REST clients, so that no
// call, watch or retry goes uncounted.
type countingTransport struct {
	next    http.RoundTripper
	metrics RequestMetrics
	clock   clock.PassiveClock
}

func (t *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	verb, resource := requestKind(req.Method, req.URL)
	start := t.clock.Now()
	resp, err := t.next.RoundTrip(req)
	if err != nil {
		t.metrics.APIRequest(verb, resource, CodeNoAnswer)
		if verb != VerbWatch {
			t.metrics.APIRequestDuration(verb, resource, t.clock.Since(start))
		}
		return resp, err
	}
	t.metrics.APIRequest(verb, resource, strconv.Itoa(resp.StatusCode))
	if verb != VerbWatch && resp.Body != nil {
		resp.Body = &timedBody{ReadCloser: resp.Body, done: func() {
			t.metrics.APIRequestDuration(verb, resource, t.clock.Since(start))
		}}
	}
	return resp, nil
}

// WrappedRoundTripper lets client-go's transport utilities (closing idle
// connections, cancelling a request) reach the transport underneath.
func (t *countingTransport) WrappedRoundTripper() http.RoundTripper { return t.next }

// timedBody calls done once, when the answer's body has been read to its
// end or closed, whichever comes first: a list's time includes sending
// its items, not only the API server's first byte.
type timedBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *timedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.once.Do(b.done)
	}
	return n, err
}

func (b *timedBody) Close() error {
	b.once.Do(b.done)
	return b.ReadCloser.Close()
}

// namespaceSubresources are the subresources of a Namespace, which the
// path /api/v1/namespaces/NAME/SUB names where it would otherwise name
// the resource SUB in the namespace NAME (as the API server parses it).
var namespaceSubresources = map[string]bool{"status": true, "finalize": true}

// requestKind is a request's verb and resource as the API server names
// them (its RBAC verbs; "pods/eviction" for a subresource), read from the
// method and the URL, which evictd's own calls build.
func requestKind(method string, u *url.URL) (verb, resource string) {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:] // /api/v1/...
	case len(parts) >= 4 && parts[0] == "apis":
		parts = parts[3:] // /apis/GROUP/VERSION/...
	default:
		return strings.ToLower(method), ResourceOther
	}
	if parts[0] == "namespaces" && len(parts) > 2 && !namespaceSubresources[parts[2]] {
		parts = parts[2:] // namespaces/NS/RESOURCE/...
	}
	resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		resource += "/" + parts[2]
	}
	switch method {
	case http.MethodGet:
		switch {
		case isWatch(u):
			verb = VerbWatch
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(method)
	}
	return verb, resource
}

// isWatch reports whether the query asks for a watch (?watch=true, or any
// spelling of true the API server parses).
func isWatch(u *url.URL) bool {
	w, err := strconv.ParseBool(u.Query().Get("watch"))
	return err == nil && w
}
