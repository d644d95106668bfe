// SPDX-License-Identifier: Apache-2.0

package evictreq

import (
	"context"

	"go.uber.org/zap"
	v1 "k8s.io/api/core/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/evictd/evictd/pkg/logging"
)

// listPage is the page size of the start-up list of EvictionRequests.
const listPage = 500

// Leftovers is what WithdrawLeftovers did.
type Leftovers struct {
	// Found: requests of evictd's requester for pods on this node.
	Found int
	// Withdrawn: those with intent Eviction, set to Withdrawn.
	Withdrawn int
	// Deleted: those deleted (withdrawn ones included).
	Deleted int
}

// WithdrawLeftovers ends the EvictionRequests an earlier evictd on this
// node left behind, crashed or killed while it waited on them: it lists
// the requests of every namespace (one call per page; RBAC "list" on
// evictionrequests), keeps those with evictd's spec.requester, of this
// install or of none (Owned), whose
// target is one of pods (this node's pods, from the informer, by UID),
// sets each one still with intent Eviction to Withdrawn, so that no
// responder evicts a pod nobody needs gone any more, and deletes it.
// Requests whose pod is gone are the garbage collector's (they are owned
// by their pod). A request Evict has asked for since start is left alone,
// and every write is conditional on the object being as listed.
//
// Call it once, after the informers synced, while requests may already be
// made; ctx bounds it. In dry run it does nothing. Errors are logged (a 404 on the list switches the
// path off as a 404 on a create does) and returned.
func (e *Evictor) WithdrawLeftovers(ctx context.Context, pods []*v1.Pod) (Leftovers, error) {
	defer e.sweepDone()
	var did Leftovers
	if e.Options().DryRun {
		return did, nil // dry run writes nothing to the cluster
	}
	onNode := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		onNode[p.UID] = true
	}
	var found []*lifecyclev1alpha1.EvictionRequest
	opts := metav1.ListOptions{Limit: listPage}
	for {
		cctx, cancel := context.WithTimeout(ctx, e.callTimeout)
		list, err := e.api.ListEvictionRequests(cctx, metav1.NamespaceAll, opts)
		cancel()
		if err != nil {
			if apierrors.IsNotFound(err) {
				e.switchOff(err)
			} else {
				e.log.Warn("cannot list EvictionRequests to withdraw those an earlier evictd left open (does the ClusterRole grant list on evictionrequests?)", logging.Err(err))
			}
			return did, err
		}
		for i := range list.Items {
			er := &list.Items[i]
			// Another install's request is not this agent's to end.
			if Owned(er, e.requester, e.mark) && er.Spec.Target.Pod != nil && onNode[er.Spec.Target.Pod.UID] {
				found = append(found, er)
			}
		}
		if list.Continue == "" {
			break
		}
		opts.Continue = list.Continue
	}
	did.Found = len(found)
	var firstErr error
	for _, er := range found {
		release, ok := e.claim(er.Spec.Target.Pod.UID)
		if !ok {
			continue
		}
		withdrawn, deleted, err := e.endLeftover(ctx, er)
		release()
		if withdrawn {
			did.Withdrawn++
		}
		if deleted {
			did.Deleted++
		}
		if err != nil && firstErr == nil {
			firstErr = err
		}
	}
	e.log.Info("searched for the EvictionRequests an earlier evictd left on this node's pods", zap.Int("found", did.Found),
		zap.Int("withdrawn", did.Withdrawn), zap.Int("deleted", did.Deleted))
	return did, firstErr
}

// endLeftover withdraws er if its intent is Eviction and deletes it, each
// write conditional on the resourceVersion last seen.
func (e *Evictor) endLeftover(ctx context.Context, er *lifecyclev1alpha1.EvictionRequest) (withdrawn, deleted bool, err error) {
	field := zap.String("evictionRequest", er.Namespace+"/"+er.Name)
	if er.Spec.Intent != lifecyclev1alpha1.EvictionRequestIntentWithdrawn {
		er = er.DeepCopy()
		er.Spec.Intent = lifecyclev1alpha1.EvictionRequestIntentWithdrawn
		cctx, cancel := context.WithTimeout(ctx, e.callTimeout)
		got, uerr := e.api.UpdateEvictionRequest(cctx, er) // carries the listed resourceVersion
		cancel()
		switch {
		case uerr == nil:
			withdrawn = true
			er = got
			e.log.Info("eviction request withdrawn: left open by an earlier evictd", field)
		case apierrors.IsNotFound(uerr) || apierrors.IsConflict(uerr):
			return false, false, nil // gone, or changed since: not a leftover to end blindly
		default:
			e.log.Warn("cannot withdraw the EvictionRequest an earlier evictd left open", field, logging.Err(uerr))
			return false, false, uerr
		}
	}
	rv, uid := er.ResourceVersion, er.UID
	cctx, cancel := context.WithTimeout(ctx, e.callTimeout)
	defer cancel()
	derr := e.api.DeleteEvictionRequest(cctx, er.Namespace, er.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv, UID: &uid}})
	switch {
	case derr == nil:
		return withdrawn, true, nil
	case apierrors.IsNotFound(derr) || apierrors.IsConflict(derr):
		return withdrawn, false, nil
	default:
		e.log.Warn("cannot delete the EvictionRequest an earlier evictd left; the garbage collector removes it with its pod", field, logging.Err(derr))
		return withdrawn, false, derr
	}
}

// claim marks uid's leftover as being ended, unless Evict has asked for
// the pod since start; release ends the claim.
func (e *Evictor) claim(uid types.UID) (release func(), ok bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.touched[uid] {
		return nil, false
	}
	ch := make(chan struct{})
	e.claims[uid] = ch
	return func() {
		e.mu.Lock()
		delete(e.claims, uid)
		e.mu.Unlock()
		close(ch)
	}, true
}

// sweepDone stops recording the pods asked for.
func (e *Evictor) sweepDone() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.swept = true
	e.touched = nil
}
