// SPDX-License-Identifier: Apache-2.0

package trace

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/evictd/evictd/pkg/pressure"
)

// MaxLine bounds one line of a trace (a pass with a large pod list).
const MaxLine = 64 << 20

// Trace is a trace read back.
type Trace struct {
	Header Header
	Passes []Pass
}

// Read reads a trace as WriteTo wrote it, gzipped or not. Each error names
// the line and what is wrong with it.
func Read(r io.Reader) (*Trace, error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(2)
	var src io.Reader = br
	if bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("trace: %w", err)
		}
		src = zr
	}
	s := bufio.NewScanner(src)
	s.Buffer(make([]byte, 0, 1<<20), MaxLine)
	t := &Trace{}
	n, header := 0, false
	var podsFrom *pressure.Observation // the last observation that carried its pods
	for s.Scan() {
		n++
		if len(bytes.TrimSpace(s.Bytes())) == 0 {
			continue
		}
		var l line
		if err := json.Unmarshal(s.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("trace: line %d: %w", n, err)
		}
		switch {
		case !header && l.Header == nil:
			return nil, fmt.Errorf("trace: line %d is not a header: not an evictd trace", n)
		case l.Header != nil && l.Pass != nil:
			return nil, fmt.Errorf("trace: line %d: a header and a pass at once", n)
		case l.Header != nil && header:
			return nil, fmt.Errorf("trace: line %d: a second header", n)
		case l.Header != nil:
			if l.Header.Format < MinFormat || l.Header.Format > Format {
				return nil, fmt.Errorf("trace: format %d, this evictd reads formats %d to %d", l.Header.Format, MinFormat, Format)
			}
			t.Header, header = *l.Header, true
		case l.Pass == nil:
			return nil, fmt.Errorf("trace: line %d: neither a header nor a pass", n)
		case len(t.Passes) > 0 && l.Pass.N <= t.Passes[len(t.Passes)-1].N:
			return nil, fmt.Errorf("trace: line %d: pass %d after pass %d", n, l.Pass.N, t.Passes[len(t.Passes)-1].N)
		case l.Pass.Observation != nil && l.Pass.Observation.Summary == nil:
			return nil, fmt.Errorf("trace: line %d: pass %d has an observation without a summary", n, l.Pass.N)
		case l.Pass.ObservationPodsAsBefore && (l.Pass.Observation == nil || podsFrom == nil):
			return nil, fmt.Errorf("trace: line %d: pass %d reuses the pods of an earlier observation, and there is none", n, l.Pass.N)
		default:
			if o := l.Pass.Observation; o != nil {
				if err := restoreNanos(o.Summary, l.Pass.ObservationNanos); err != nil {
					return nil, fmt.Errorf("trace: line %d: pass %d: %w", n, l.Pass.N, err)
				}
				if l.Pass.ObservationPodsAsBefore {
					o.Summary.Pods, o.Pods = podsFrom.Summary.Pods, agedExtras(podsFrom.Pods, o.Time.Sub(podsFrom.Time))
				} else {
					podsFrom = o
				}
			}
			t.Passes = append(t.Passes, *l.Pass)
		}
	}
	if err := s.Err(); err != nil {
		return nil, fmt.Errorf("trace: after line %d: %w", n, err)
	}
	switch {
	case !header:
		return nil, errors.New("trace: empty")
	case t.Header.Passes > 0 && len(t.Passes) != t.Header.Passes:
		return nil, fmt.Errorf("trace: %d passes, its header says %d: cut short", len(t.Passes), t.Header.Passes)
	}
	return t, nil
}

// agedExtras is the pods' extras of an earlier observation as a pass that
// reused them d later had them: the same, their ephemeral-storage figures d
// older (the observer walks only in passes that read the pods).
func agedExtras(pods []pressure.PodExtras, d time.Duration) []pressure.PodExtras {
	if !slices.ContainsFunc(pods, func(x pressure.PodExtras) bool { return x.EphemeralParts != nil }) {
		return pods
	}
	out := slices.Clone(pods)
	for i := range out {
		if out[i].EphemeralParts != nil {
			out[i].EphemeralAge += d
		}
	}
	return out
}
