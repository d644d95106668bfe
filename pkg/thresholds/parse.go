// SPDX-License-Identifier: Apache-2.0

package thresholds

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Disabled is the value that switches a threshold off. evictd fills in a
// default for every signal the operator does not name (so that setting one
// threshold never silently drops the others, unlike kubelet#119985); naming a
// signal with this value is how an operator says "no threshold here", e.g.
// --eviction-hard=pid.available<none or, in the file, `pid.available: none`.
const Disabled = "none"

// SwitchedOff reports whether raw is a value the kubelet reads as no
// threshold: exactly "0%" or "100%", which parseThresholdStatement (in
// pkg/kubelet/eviction/helpers.go) ignores, or any other percentage its
// parsePercentage reads as 0 ("0.0%", "-0%", "0e3%", "1e-50%"), which it
// keeps as a threshold of 0, met only by a reading below zero (a corrupt
// one, kubernetes#52386). evictd reads them all as off, so that a kubelet
// setting copied over never turns into a threshold that is always met
// (100%) and evicts up to the cap, or one met only by a bad reading. The
// stall signals are evictd's own and keep their own rule (a share in
// (0%, 100%)).
func SwitchedOff(s Signal, raw string) bool {
	raw = strings.TrimSpace(raw)
	if s.Stall() || !strings.HasSuffix(raw, "%") {
		return false
	}
	if raw == "0%" || raw == "100%" {
		return true
	}
	k, _, err := kubeletPercentage(raw)
	return err == nil && k == 0
}

// kubeletPercentage reads a percentage as the kubelet's parsePercentage
// does, every trailing "%" dropped and the number taken as a float32 over
// 100, for the checks that decide what the kubelet makes of it; exact is
// the same number as a float64 fraction, the value evictd keeps.
func kubeletPercentage(s string) (kubelet float32, exact float64, err error) {
	num := strings.TrimRight(s, "%")
	p32, err := strconv.ParseFloat(num, 32)
	if err != nil {
		return 0, 0, err
	}
	p64, _ := strconv.ParseFloat(num, 64) // well formed and in range: the 32-bit parse took it
	return float32(p32) / 100, p64 / 100, nil
}

// SwitchedOffEntries lists the thresholds of spec that SwitchedOff reads as
// none, as "eviction-hard: memory.available<100%", for a warning.
func SwitchedOffEntries(spec Spec) []string {
	var out []string
	for _, part := range []struct {
		what string
		m    map[string]string
	}{{"eviction-hard", spec.Hard}, {"eviction-soft", spec.Soft}} {
		for _, k := range sortedKeys(part.m) {
			if s, err := ParseSignal(k); err == nil && SwitchedOff(s, part.m[k]) {
				out = append(out, part.what+": "+k+s.Operator()+strings.TrimSpace(part.m[k]))
			}
		}
	}
	return out
}

// Value is a threshold amount: an absolute quantity (bytes, inodes or PIDs)
// or a fraction of the signal's capacity.
type Value struct {
	// Quantity is set for absolute values; nil when Percentage is used.
	Quantity *resource.Quantity
	// Percentage is the fraction of capacity in (0, 1] when Quantity is nil.
	Percentage float64
	// stalled is, for a stall signal's threshold, the share of time
	// stalled as written (Percentage holds 1 − stalled, the share of time
	// not stalled, so that every threshold is met when what is "available"
	// drops below its amount).
	stalled float64
}

// StallValue is the threshold value of a stall signal written as
// SIGNAL>share: met when the share of time stalled exceeds share (0, 1).
func StallValue(share float64) Value {
	return Value{Percentage: 1 - share, stalled: share}
}

// Stalled is the share of time stalled that a stall threshold's value
// stands for, and whether v is such a value.
func (v Value) Stalled() (float64, bool) { return v.stalled, v.stalled > 0 }

// Amount resolves v against the capacity of an observation.
func (v Value) Amount(capacity int64) int64 {
	if v.Quantity != nil {
		return SaturatedValue(v.Quantity)
	}
	f := math.Ceil(v.Percentage * float64(capacity))
	if f >= math.MaxInt64 { // float64(MaxInt64) rounds up to 2^63
		return math.MaxInt64
	}
	return int64(f)
}

// The int64 range as quantities, for SaturatedValue; never modified.
var (
	maxInt64Quantity = *resource.NewQuantity(math.MaxInt64, resource.DecimalSI)
	minInt64Quantity = *resource.NewQuantity(math.MinInt64, resource.DecimalSI)
)

// SaturatedValue is q rounded up to an integer and clamped to the int64
// range. resource.Quantity.Value() does not clamp: beyond int64 it returns 0
// for some inputs ("10E") and wraps for others.
func SaturatedValue(q *resource.Quantity) int64 {
	switch {
	case q.Cmp(maxInt64Quantity) >= 0:
		return math.MaxInt64
	case q.Cmp(minInt64Quantity) <= 0:
		return math.MinInt64
	}
	return q.Value()
}

// String prints v in the syntax Parse accepts: a quantity in its canonical
// form, a percentage as written (FormatPercent).
func (v Value) String() string {
	if v.stalled > 0 {
		return FormatPercent(v.stalled)
	}
	if v.Quantity != nil {
		return v.Quantity.String()
	}
	return FormatPercent(v.Percentage)
}

// FormatPercent prints the fraction f as a percentage with the fewest
// digits that Parse reads back as f: "7%" for the 0.07 that "7%" parsed
// into, where f*100 prints as 7.000000000000001 (the multiplication
// rounds, Parse's division rounded too).
func FormatPercent(f float64) string {
	for prec := 1; prec <= 17; prec++ {
		s := strconv.FormatFloat(f*100, 'g', prec, 64)
		if p, err := strconv.ParseFloat(s, 64); err == nil && p/100 == f {
			// 'g' may have chosen an exponent; the digits it kept are
			// printed plainly.
			return strconv.FormatFloat(p, 'f', -1, 64) + "%"
		}
	}
	return strconv.FormatFloat(f*100, 'f', -1, 64) + "%"
}

// Threshold is one eviction threshold.
type Threshold struct {
	Signal Signal
	// Value is met when the signal's available amount drops below it.
	Value Value
	// GracePeriod is how long a soft threshold must stay met before evictd
	// acts; 0 means the threshold is hard and acts at once.
	GracePeriod time.Duration
	// MinReclaim, when set, keeps an acted-on threshold active until the
	// available amount reaches Value + MinReclaim.
	MinReclaim *Value
}

// Hard reports whether t acts without a grace period.
func (t Threshold) Hard() bool { return t.GracePeriod == 0 }

// String prints t as the kubelet would write it, with its grace period and
// minimum reclaim when set.
func (t Threshold) String() string {
	var b strings.Builder
	b.WriteString(string(t.Signal))
	b.WriteString(t.Signal.Operator())
	b.WriteString(t.Value.String())
	if !t.Hard() {
		b.WriteString(" (soft, grace ")
		b.WriteString(t.GracePeriod.String())
		b.WriteByte(')')
	}
	if t.MinReclaim != nil {
		b.WriteString(" (min-reclaim ")
		b.WriteString(t.MinReclaim.String())
		b.WriteByte(')')
	}
	return b.String()
}

// Spec is the textual form of a threshold set, keyed by signal name, as the
// kubelet's configuration holds it (evictionHard, evictionSoft,
// evictionSoftGracePeriod, evictionMinimumReclaim).
type Spec struct {
	Hard           map[string]string
	Soft           map[string]string
	GracePeriod    map[string]string
	MinimumReclaim map[string]string
}

// Parse validates a Spec and turns it into thresholds, hard ones first, each
// group in action order. It follows the kubelet's ParseThresholdConfig
// (pkg/kubelet/eviction/helpers.go) where that gives a setting a useful
// meaning, and otherwise rejects, with an error that says what the kubelet
// would do: unknown signals, zero or negative quantities, quantities beyond
// int64, percentages outside (0, 100], soft thresholds without a grace
// period, grace periods of 0 (the kubelet makes the soft threshold a hard
// one), and grace periods or minimum reclaims that belong to no threshold
// (the kubelet ignores them). The first problem found (in signal-name
// order) is returned, naming the bad entry.
func Parse(spec Spec) ([]Threshold, error) {
	hard, err := parseValues("eviction-hard", spec.Hard)
	if err != nil {
		return nil, err
	}
	soft, err := parseValues("eviction-soft", spec.Soft)
	if err != nil {
		return nil, err
	}
	grace := make(map[Signal]time.Duration, len(spec.GracePeriod))
	for _, k := range sortedKeys(spec.GracePeriod) {
		s, err := ParseSignal(k)
		if err != nil {
			return nil, fmt.Errorf("eviction-soft-grace-period: %w", err)
		}
		raw := strings.TrimSpace(spec.GracePeriod[k])
		d, err := time.ParseDuration(raw)
		if err != nil {
			return nil, fmt.Errorf("eviction-soft-grace-period: %s=%q is not a duration", k, raw)
		}
		if d < 0 {
			return nil, fmt.Errorf("eviction-soft-grace-period: %s=%s must not be negative", k, raw)
		}
		if _, ok := soft[s]; !ok {
			if SwitchedOff(s, spec.Soft[k]) {
				continue // the threshold it belongs to is off
			}
			return nil, fmt.Errorf("eviction-soft-grace-period: %s has a grace period but no soft threshold (the kubelet ignores it; remove it, or add the soft threshold)", k)
		}
		if d == 0 {
			// The kubelet's isHardEvictionThreshold is GracePeriod == 0.
			return nil, fmt.Errorf("eviction-soft-grace-period: %s=%s: the kubelet makes such a soft threshold a hard one (met, it acts at once and gives the pod 1 s, not eviction-max-pod-grace-period); set it in eviction-hard instead", k, raw)
		}
		grace[s] = d
	}
	minReclaim := make(map[Signal]Value, len(spec.MinimumReclaim))
	for _, k := range sortedKeys(spec.MinimumReclaim) {
		s, err := ParseSignal(k)
		if err != nil {
			return nil, fmt.Errorf("eviction-minimum-reclaim: %w", err)
		}
		v, err := parseValue(strings.TrimSpace(spec.MinimumReclaim[k]), true)
		if err != nil {
			return nil, fmt.Errorf("eviction-minimum-reclaim: %s=%q: %w", k, spec.MinimumReclaim[k], err)
		}
		_, h := hard[s]
		_, sf := soft[s]
		if !h && !sf {
			if SwitchedOff(s, spec.Hard[k]) || SwitchedOff(s, spec.Soft[k]) {
				continue // the threshold it belongs to is off
			}
			return nil, fmt.Errorf("eviction-minimum-reclaim: %s has a minimum reclaim but no threshold (the kubelet ignores it; remove it, or add the threshold)", k)
		}
		minReclaim[s] = v
	}

	out := make([]Threshold, 0, len(hard)+len(soft))
	for _, s := range signalOrder {
		if v, ok := hard[s]; ok {
			out = append(out, Threshold{Signal: s, Value: v, MinReclaim: minReclaimFor(minReclaim, s)})
		}
	}
	for _, s := range signalOrder {
		v, ok := soft[s]
		if !ok {
			continue
		}
		g, ok := grace[s]
		if !ok {
			return nil, fmt.Errorf("eviction-soft: %s<%s has no grace period (set eviction-soft-grace-period %s=DURATION)", s, v, s)
		}
		out = append(out, Threshold{Signal: s, Value: v, GracePeriod: g, MinReclaim: minReclaimFor(minReclaim, s)})
	}
	return out, nil
}

// minReclaimFor gives each threshold its own copy so that callers can't
// change one threshold through another.
func minReclaimFor(m map[Signal]Value, s Signal) *Value {
	v, ok := m[s]
	if !ok || (v.Quantity != nil && v.Quantity.Sign() == 0) {
		return nil
	}
	c := v
	if v.Quantity != nil {
		q := v.Quantity.DeepCopy()
		c.Quantity = &q
	}
	return &c
}

func parseValues(what string, m map[string]string) (map[Signal]Value, error) {
	out := make(map[Signal]Value, len(m))
	for _, k := range sortedKeys(m) {
		s, err := ParseSignal(k)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		raw := strings.TrimSpace(m[k])
		if raw == Disabled || SwitchedOff(s, raw) {
			continue
		}
		v, err := parseValue(raw, false)
		if err == nil && s.Stall() {
			v, err = stallValue(v, raw)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s%s%s: %w", what, k, s.Operator(), printable(raw), err)
		}
		out[s] = v
	}
	return out, nil
}

// printable keeps user input readable in errors and on one line: it is
// quoted only when it holds something that would not print plainly.
func printable(s string) string {
	for _, r := range s {
		if !strconv.IsPrint(r) || r == '"' {
			return strconv.Quote(s)
		}
	}
	return s
}

// stallValue turns a parsed percentage into a stall threshold's value. A
// stall share of 100 % can never be exceeded, so it is refused rather than
// silently never met.
func stallValue(v Value, raw string) (Value, error) {
	if v.Quantity != nil {
		return Value{}, fmt.Errorf("%s is not a percentage: a stall threshold is a share of time stalled, such as 40%%", raw)
	}
	if v.Percentage >= 1 {
		return Value{}, fmt.Errorf("a stall share of %s can never be exceeded; want a percentage in (0%%, 100%%)", raw)
	}
	return StallValue(v.Percentage), nil
}

// ParseValue parses a threshold amount: a quantity ("500Mi", "1000") that
// must be positive, or a percentage ("10%") in (0, 100].
func ParseValue(s string) (Value, error) {
	return parseValue(strings.TrimSpace(s), false)
}

// parseValue parses a threshold's amount, or a minimum reclaim's (reclaim:
// zero allowed, no upper bound but int64's). Where the kubelet takes a value
// that evictd refuses, the error says what the kubelet makes of it.
func parseValue(s string, reclaim bool) (Value, error) {
	if s == "" {
		return Value{}, fmt.Errorf("empty value")
	}
	if strings.HasSuffix(s, "%") {
		// The kubelet's arithmetic decides (10%% is 10%, and 100.000001%
		// is 100% in a float32); evictd keeps the float64.
		k, p, err := kubeletPercentage(s)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return Value{}, fmt.Errorf("percentage %s is outside (0%%, 100%%]", s)
		case err != nil:
			return Value{}, fmt.Errorf("%q is not a percentage", s)
		case math.IsNaN(p) && reclaim:
			return Value{}, fmt.Errorf("%s is not a number: the kubelet takes it as a minimum reclaim of NaN times the capacity, an integer that depends on the CPU, in effect no minimum reclaim; leave it out", s)
		case math.IsNaN(p):
			return Value{}, fmt.Errorf("%s is not a number: the kubelet takes it as a threshold of NaN times the capacity, an integer that depends on the CPU (never met on amd64); write 0%% to switch the threshold off", s)
		case reclaim && k > 1:
			return Value{}, fmt.Errorf("minimum reclaim %s is above 100%%: %s", s, neverClears)
		case !(k > 0 && k <= 1):
			return Value{}, fmt.Errorf("percentage %s is outside (0%%, 100%%]", s)
		}
		return Value{Percentage: math.Min(p, 1)}, nil
	}
	q, err := parseQuantity(s)
	if err != nil {
		return Value{}, err
	}
	if q.Sign() < 0 || (q.Sign() == 0 && !reclaim) {
		return Value{}, fmt.Errorf("quantity %s must be greater than zero", s)
	}
	if q.Cmp(maxInt64Quantity) > 0 {
		if reclaim {
			return Value{}, fmt.Errorf("minimum reclaim %s is beyond the int64 range: %s", s, neverClears)
		}
		return Value{}, fmt.Errorf("quantity %s is beyond the int64 range: the kubelet takes it as a threshold always met, and evicts a pod every pass until no pod it may evict is left", s)
	}
	return Value{Quantity: &q}, nil
}

// neverClears is what the kubelet does with a minimum reclaim larger than
// anything the signal can have available.
const neverClears = "the kubelet takes it, and a threshold it has acted on then never clears (available never reaches threshold + minimum reclaim): it evicts a pod every pass until no pod it may evict is left"

// Quantities beyond maxQuantityLen characters are refused;
// maxQuantityExponent bounds the decimal exponent given to
// resource.ParseQuantity (see parseQuantity).
const (
	maxQuantityLen      = 64
	maxQuantityExponent = 100
)

// Stand-ins for quantities whose exponent is beyond maxQuantityExponent.
var (
	beyondInt64Quantity = resource.MustParse("1e101")
	nanoQuantity        = resource.MustParse("1e-9") // what ParseQuantity makes of 1e-40
)

// parseQuantity is resource.ParseQuantity, without the seconds it takes
// on a large decimal exponent ("1e9999999" takes about two seconds, so a
// typo or hostile value in a config file could stall startup). Beyond
// ±maxQuantityExponent the value is known without it: in at most
// maxQuantityLen characters, a positive mantissa times 10^101 or more is
// beyond int64 (the caller refuses it), and times 10^-101 or less is below
// 1n, which ParseQuantity rounds up to 1n (1e-9), as it does for the
// kubelet.
func parseQuantity(s string) (resource.Quantity, error) {
	if len(s) > maxQuantityLen {
		return resource.Quantity{}, fmt.Errorf("quantity %.20q... is longer than %d characters (the kubelet reads the number it spells); write it shorter", s, maxQuantityLen)
	}
	if i := strings.IndexAny(s, "eE"); i > 0 && i+1 < len(s) {
		// A large exponent of a plain number is settled here; whatever
		// else ("1Ei", "2e3") ParseQuantity judges.
		exp, err := strconv.Atoi(s[i+1:])
		if err == nil && (exp > maxQuantityExponent || exp < -maxQuantityExponent) {
			mantissa := s[:i]
			m, err := resource.ParseQuantity(mantissa)
			switch {
			case err != nil || strings.Trim(mantissa, "+-0123456789.") != "":
				return resource.Quantity{}, fmt.Errorf("%q is not a quantity or percentage", s)
			case m.Sign() <= 0:
				return m, nil // zero or negative, whatever the exponent
			case exp > 0:
				return beyondInt64Quantity.DeepCopy(), nil
			default:
				return nanoQuantity.DeepCopy(), nil
			}
		}
	}
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return resource.Quantity{}, fmt.Errorf("%q is not a quantity or percentage", s)
	}
	return q, nil
}

// SplitStatements splits the flag form of thresholds,
// "memory.available<500Mi,nodefs.available<10%", into signal → value. The
// only operator is "<" (the direction is implied by the signal); any other,
// and any signal named twice, is an error. Empty items are ignored, so an
// empty string is an empty map.
func SplitStatements(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		i := strings.IndexAny(item, "<>=!")
		if i < 0 {
			return nil, fmt.Errorf("%q has no operator; want SIGNAL<VALUE, or SIGNAL>PERCENT for a stall signal", item)
		}
		if (item[i] != '<' && item[i] != '>') || (i+1 < len(item) && strings.IndexByte("<>=!", item[i+1]) >= 0) {
			return nil, fmt.Errorf("%q: unsupported operator; only < is allowed (and > for a stall signal)", item)
		}
		name, value := strings.TrimSpace(item[:i]), strings.TrimSpace(item[i+1:])
		if want := Signal(name).Operator(); string(item[i]) != want {
			if Signal(name).Stall() {
				return nil, fmt.Errorf("%q: a stall signal's threshold is a share of time stalled, written %s>PERCENT", item, name)
			}
			return nil, fmt.Errorf("%q: unsupported operator; only < is allowed (> is for the stall signals)", item)
		}
		if err := addOnce(out, name, value, item); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// SplitPairs splits "memory.available=1m30s,nodefs.available=500Mi", the flag
// form of grace periods and minimum reclaims, into signal → value; a signal
// named twice is an error.
func SplitPairs(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, value, ok := strings.Cut(item, "=")
		if !ok {
			return nil, fmt.Errorf("%q is not SIGNAL=VALUE", item)
		}
		if err := addOnce(out, strings.TrimSpace(name), strings.TrimSpace(value), item); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func addOnce(m map[string]string, name, value, item string) error {
	if name == "" {
		return fmt.Errorf("%q has no signal", item)
	}
	if _, dup := m[name]; dup {
		// The kubelet's map flags keep the last value given.
		return fmt.Errorf("%q: signal %s is given twice (the kubelet keeps the last one, %s); give it once", item, printable(name), printable(value))
	}
	m[name] = value
	return nil
}

// JoinStatements is the inverse of SplitStatements, in a stable order.
func JoinStatements(m map[string]string) string {
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + Signal(k).Operator() + m[k]
	}
	return strings.Join(parts, ",")
}

// JoinPairs is the inverse of SplitPairs, in a stable order.
func JoinPairs(m map[string]string) string {
	keys := sortedKeys(m)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + m[k]
	}
	return strings.Join(parts, ",")
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
