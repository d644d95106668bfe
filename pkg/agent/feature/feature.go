// SPDX-License-Identifier: Apache-2.0

// Package feature is the one seam through which the agent's optional parts
// follow the pass: the node brake, shadow mode and the outrun warning each
// implement Feature in a package of their own, and the loop calls every
// registered one at the same points of each acting pass. A feature changes
// no decision of the pass: it reports, or holds an eviction call back.
//
// Adding one is its package and one registration line: agent.NewLoop's for
// a part every agent runs, the wiring's (cmd/evictd/app) for one an option
// turns on. Signal families, which do change decisions (they bring
// signals and rankings of their own), have their own seam: package family.
package feature

import (
	"context"
	"time"

	"github.com/evictd/evictd/pkg/thresholds"
)

// Feature follows an acting agent's passes. Embed Nop to implement only
// the points a feature needs.
type Feature interface {
	// Assessed is told what the pass assessed, before it decides.
	Assessed(Assessment)
	// Episodes is told, after the pass updated its pressure episodes,
	// which started, which ended, and which are open.
	Episodes(Episodes)
	// BeforeCall runs on an eviction call's goroutine, before the call:
	// it may hold the call back (within its own bound) until the node is
	// ready for the victim's replacement.
	BeforeCall(ctx context.Context, resource string)
	// Answered is told an eviction call's answer, as the pass takes it.
	Answered(Answer)
}

// Assessment is what a pass knows of the signals before it decides.
type Assessment struct {
	// Thresholds are the thresholds the pass decides with.
	Thresholds []thresholds.Threshold
	Signals    map[thresholds.Signal]thresholds.Observation
	// Rates are each signal's fill rate in bytes per second (positive
	// while available falls); Trends whether the fall is sustained.
	Rates  map[thresholds.Signal]float64
	Trends map[thresholds.Signal]bool
	// ActEarly: the pass acts on predicted crossings (--act-early).
	ActEarly bool
	// LastLead is the last eviction's measured time from acceptance to
	// memory back (package leadtime), 0 before one was measured.
	LastLead time.Duration
}

// Episode is a pressure episode: its resource (package episode's names)
// and when it started.
type Episode struct {
	Resource string
	Start    time.Time
}

// Episodes is how a pass left the pressure episodes.
type Episodes struct {
	Now     time.Time
	Started []Episode
	Ended   []Episode
	// Open are the episodes under way after the pass, started ones among
	// them.
	Open []Episode
}

// Answer is an eviction call's answer.
type Answer struct {
	// Resource is the episode's that made the call.
	Resource string
	// Pod is namespace/name.
	Pod    string
	UID    string
	Signal string
	// Result is the call's evict.Result.
	Result string
	At     time.Time
}

// Nop is a Feature that follows nothing: embed it, and implement the
// points the feature needs.
type Nop struct{}

func (Nop) Assessed(Assessment)                {}
func (Nop) Episodes(Episodes)                  {}
func (Nop) BeforeCall(context.Context, string) {}
func (Nop) Answered(Answer)                    {}

// Set calls each of its features in turn, in the order they were
// registered.
type Set []Feature

func (s Set) Assessed(a Assessment) {
	for _, f := range s {
		f.Assessed(a)
	}
}

func (s Set) Episodes(e Episodes) {
	for _, f := range s {
		f.Episodes(e)
	}
}

func (s Set) BeforeCall(ctx context.Context, resource string) {
	for _, f := range s {
		f.BeforeCall(ctx, resource)
	}
}

func (s Set) Answered(a Answer) {
	for _, f := range s {
		f.Answered(a)
	}
}
