// SPDX-License-Identifier: Apache-2.0

package kube

import (
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	lifecyclev1alpha1 "k8s.io/api/lifecycle/v1alpha1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
)

// scheme holds only the API groups evictd calls. Every type registered
// here is type data touched at start-up; that is the memory this package
// exists to save.
var scheme = runtime.NewScheme()

var (
	parameterCodec = runtime.NewParameterCodec(scheme)
	negotiated     = jsonOnly{serializer.NewCodecFactory(scheme).WithoutConversion()}
)

func init() {
	// Options and Status without a group, as the clientset's scheme has
	// them: a 404's Status body and the List/DeleteOptions encodings.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, policyv1.AddToScheme, eventsv1.AddToScheme, schedulingv1.AddToScheme, lifecyclev1alpha1.AddToScheme,
		coordinationv1.AddToScheme, authnv1.AddToScheme, authzv1.AddToScheme,
	} {
		utilruntime.Must(add(scheme))
	}
}

// jsonOnly offers the API server JSON and nothing else: every request
// sends and accepts only application/json, so the YAML, protobuf and CBOR
// serializers of a CodecFactory would never be used.
type jsonOnly struct {
	runtime.NegotiatedSerializer
}

func (j jsonOnly) SupportedMediaTypes() []runtime.SerializerInfo {
	for _, info := range j.NegotiatedSerializer.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON {
			return []runtime.SerializerInfo{info}
		}
	}
	return nil
}
