// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/evictd/evictd/pkg/pressure"
)

// writeBack writes tr as the recorder writes a trace: the header with its
// count of passes, then each pass whole (its observation's pods written,
// its sub-second parts taken from its times).
func writeBack(t *testing.T, tr *Trace) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	h := tr.Header
	h.Passes = len(tr.Passes)
	if err := enc.Encode(line{Header: &h}); err != nil {
		t.Fatalf("the header read, %+v, does not encode: %v", h, err)
	}
	for _, p := range tr.Passes {
		p.ObservationPodsAsBefore, p.ObservationNanos = false, nil
		if p.Observation != nil {
			p.ObservationNanos = nanos(p.Observation.Summary)
		}
		if err := enc.Encode(line{Pass: &p}); err != nil {
			t.Fatalf("pass %d read does not encode: %v", p.N, err)
		}
	}
	return b.Bytes()
}

// sayable reports whether every time of tr's observations is one that
// metav1.Time's JSON can say: a year from 1 to 9999 (a sub-second part
// added to 9999-12-31T23:59:59Z can carry a time past it).
func sayable(tr *Trace) bool {
	ok := true
	for _, p := range tr.Passes {
		walkTimes(reflect.ValueOf(p.Observation), func(m *metav1.Time) {
			if y := m.Year(); !m.IsZero() && (y < 1 || y > 9999) {
				ok = false
			}
		})
	}
	return ok
}

// passNumbers is tr's pass numbers, in order.
func passNumbers(tr *Trace) []uint64 {
	var ns []uint64
	for _, p := range tr.Passes {
		ns = append(ns, p.N)
	}
	return ns
}

// FuzzRead: `evictd replay` reads a trace it is handed, which may be cut
// short, edited or another file. Nothing may panic; a refused trace is one
// error beginning "trace: " and no trace; a trace read keeps the rules Read
// checks (a known format, passes in order, an observation with its
// summary, the count its header says); and what is read, written back as
// the recorder writes, reads back the same.
func FuzzRead(f *testing.F) {
	// A recorded trace of three passes, with observations, pods and calls.
	r := NewRecorder(Header{Node: "node-a", Version: "v1.2.3", Started: t0, Args: []string{"--node-name=node-a"},
		Start: &Placement{Thresholds: []string{"memory.available<300Mi"}, KubeletRead: true,
			KubeletHard: map[string]string{"memory.available": "100Mi"}, Capacity: map[string]int64{"memory.available": 8 << 30}}}, DefaultBudget)
	fig := newFigures(7)
	pods := makePods(2)
	for i := range 3 {
		n := uint64(i + 1)
		at := t0.Add(time.Duration(i) * time.Second)
		r.Begin(n, uint64(i), at, Wakeup{Source: "psi", Name: "memory.pressure", At: at})
		r.Drained(0, []Call{{Seq: n, Decision: Decision{Pass: n, Pod: "ns-0/pod-000", Signal: "memory.available", Hard: true}, At: at, Result: "evicted"}})
		r.Deleted(Deletion{At: at, UID: "gone", Namespace: "ns-0", Name: "gone"})
		o := makeObs(at.Add(7*time.Millisecond), 1+i%2, fig)
		if i == 2 {
			// Reuses the pods' figures of the pass before: its line leaves
			// them out.
			prev := makeObs(at.Add(-993*time.Millisecond), 2, fig)
			o.Summary.Pods, o.Pods, o.PodsAge = prev.Summary.Pods, prev.Pods, time.Second
		}
		r.Observed(o, nil, at.Add(9*time.Millisecond), true)
		r.PodState(pods, map[string]int32{"standard": 1000}, nil, testNode("7"))
		r.End()
	}
	var buf bytes.Buffer
	if _, err := r.WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	plain := gunzip(f, buf.Bytes())
	f.Add(plain, false)
	f.Add(plain, true)
	f.Add(buf.Bytes(), false)
	f.Add([]byte(`{"header":{"format":5,"node":"n","passes":2}}`+"\n"+`{"pass":{"n":1}}`+"\n"+`{"pass":{"n":1}}`+"\n"), false)
	f.Add([]byte(`{"header":{"format":2,"node":"n"}}`+"\n"+`{"pass":{"n":3,"observation":{"summary":{}},"observationPodsAsBefore":true}}`+"\n"), true)
	f.Add([]byte(""), false)
	f.Fuzz(func(t *testing.T, data []byte, zipped bool) {
		in := data
		if zipped {
			in = gz(data)
		}
		tr, err := Read(bytes.NewReader(in))
		if err != nil {
			msg := err.Error()
			if tr != nil || !strings.HasPrefix(msg, "trace: ") || strings.Count(msg, "trace:") != 1 || strings.Contains(msg, "\n") {
				t.Fatalf("Read(%q): trace %v and error %q: want no trace and one line beginning \"trace: \"", data, tr, msg)
			}
			return
		}
		h := tr.Header
		if h.Format < MinFormat || h.Format > Format || (h.Passes > 0 && h.Passes != len(tr.Passes)) {
			t.Fatalf("Read(%q): format %d with %d passes, its header says %d", data, h.Format, len(tr.Passes), h.Passes)
		}
		var podsFrom *pressure.Observation
		for i, p := range tr.Passes {
			if i > 0 && p.N <= tr.Passes[i-1].N {
				t.Fatalf("Read(%q): pass %d after pass %d", data, p.N, tr.Passes[i-1].N)
			}
			o := p.Observation
			if o == nil {
				continue
			}
			if o.Summary == nil {
				t.Fatalf("Read(%q): pass %d has an observation without a summary", data, p.N)
			}
			if p.ObservationPodsAsBefore {
				if podsFrom == nil || !reflect.DeepEqual(o.Summary.Pods, podsFrom.Summary.Pods) {
					t.Fatalf("Read(%q): pass %d reuses pods it was not given", data, p.N)
				}
			} else {
				podsFrom = o
			}
		}
		if !sayable(tr) {
			return
		}
		// The first writing settles what JSON cannot say twice the same (a
		// fraction of a second metav1.Time drops); from then on, reading and
		// writing back changes nothing.
		once := writeBack(t, tr)
		tr2, err := Read(bytes.NewReader(once))
		if err != nil {
			t.Fatalf("Read(%q) written back as %q, which does not read: %v", data, once, err)
		}
		if !reflect.DeepEqual(passNumbers(tr2), passNumbers(tr)) {
			t.Fatalf("Read(%q): passes %v, written back and read: %v", data, passNumbers(tr), passNumbers(tr2))
		}
		twice := writeBack(t, tr2)
		tr3, err := Read(bytes.NewReader(twice))
		if err != nil {
			t.Fatalf("Read(%q) written back twice as %q, which does not read: %v", data, twice, err)
		}
		if thrice := writeBack(t, tr3); !bytes.Equal(thrice, twice) {
			t.Fatalf("Read(%q) written back twice as\n%s\nthen read and written as\n%s", data, twice, thrice)
		}
	})
}
