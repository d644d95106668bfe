// SPDX-License-Identifier: Apache-2.0

package actuator

import (
	"bytes"
	"fmt"
	"strconv"
)

// Margin is what Contain leaves a victim above its usage. The victim's
// growth between the read and the write fits in it at the fill rates the
// benchmarks reach (16 MiB is 8 ms at 2 GiB/s), so the kernel does not
// reclaim in evictd's write (v2) or refuse it (v1); after it, the victim
// waits or is throttled.
const Margin = 16 << 20

// pageSize rounds limits as the kernel would store them.
const pageSize = 4096

// CapAbove is the limit Contain writes for a cgroup using usage bytes:
// usage plus Margin, rounded up to a page.
func CapAbove(usage uint64) uint64 {
	return (usage + Margin + pageSize - 1) / pageSize * pageSize
}

// ParseBytes parses a cgroup counter file (memory.current,
// memory.usage_in_bytes): one number of bytes.
func ParseBytes(b []byte) (uint64, error) {
	v := string(bytes.TrimSuffix(b, []byte{'\n'}))
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("malformed: %q is not a number of bytes", v)
	}
	return n, nil
}

// ParseLimit parses a v2 limit file (memory.high, memory.max): "max" or a
// number of bytes, returned as the kernel takes it back.
func ParseLimit(b []byte) (string, error) {
	v := string(bytes.TrimSuffix(b, []byte{'\n'}))
	if v == "max" {
		return v, nil
	}
	if _, err := strconv.ParseUint(v, 10, 64); err != nil {
		return "", fmt.Errorf("malformed: %q is neither a number of bytes nor \"max\"", v)
	}
	return v, nil
}
