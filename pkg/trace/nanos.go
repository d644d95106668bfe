// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"fmt"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// metav1.Time is encoded in JSON to the second, as the Summary API's
// timestamps are; the loop, though, compares observations taken 100 ms
// apart by them (fill rates, the threshold tracker). A pass keeps the
// sub-second part of each such time in its observation, in the order a
// walk of the value meets them, and the reader puts them back.

var metaTime = reflect.TypeFor[metav1.Time]()

// nanos returns the nanoseconds of every metav1.Time in v, in walk order.
func nanos(v any) []int32 {
	var out []int32
	walkTimes(reflect.ValueOf(v), func(t *metav1.Time) { out = append(out, int32(t.Nanosecond())) })
	return out
}

// restoreNanos adds ns, which nanos returned for the value v was decoded
// from, back to v's times.
func restoreNanos(v any, ns []int32) error {
	i := 0
	walkTimes(reflect.ValueOf(v), func(t *metav1.Time) {
		if i < len(ns) && !t.IsZero() {
			t.Time = t.Time.Add(time.Duration(ns[i]))
		}
		i++
	})
	if i != len(ns) {
		return fmt.Errorf("%d sub-second parts for %d timestamps", len(ns), i)
	}
	return nil
}

// walkTimes calls f for each metav1.Time reachable from v through
// pointers, structs, slices and arrays (maps are not walked: their order
// is not stable; the Summary has none).
func walkTimes(v reflect.Value, f func(*metav1.Time)) {
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if !v.IsNil() {
			walkTimes(v.Elem(), f)
		}
	case reflect.Struct:
		if v.Type() == metaTime {
			if v.CanAddr() {
				f(v.Addr().Interface().(*metav1.Time))
			}
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				walkTimes(v.Field(i), f)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			walkTimes(v.Index(i), f)
		}
	}
}
