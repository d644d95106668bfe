// SPDX-License-Identifier: Apache-2.0

package guestmem

import "testing"

// The start of the swap node's /proc/meminfo and root memory.stat, as cat
// prints them one after the other.
const swapNode = `MemTotal:        2013320 kB
MemFree:          812344 kB
MemAvailable:    1254012 kB
Buffers:            8540 kB
Cached:           520300 kB
SwapCached:        74940 kB
anon 520093696
file 457609216
kernel 93323264
kernel_stack 2998272
anon_thp 0
file_mapped 122097664
inactive_anon 301989888
active_anon 218103808
inactive_file 258736128
active_file 198873088
`

func TestAvailableFigures(t *testing.T) {
	free, err := Available([]byte(swapNode))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(812344<<10 + 258736128); free != want {
		t.Errorf("Available %d, want MemFree + inactive_file %d", free, want)
	}
	root, err := RootUsageAvailable([]byte(swapNode))
	if err != nil {
		t.Fatal(err)
	}
	// file_mapped and anon_thp must not be taken for file and anon.
	if want := int64(2013320<<10 - (520093696 + 457609216 - 258736128)); root != want {
		t.Errorf("RootUsageAvailable %d, want MemTotal - (anon + file - inactive_file) %d", root, want)
	}
	if root <= free {
		t.Errorf("the root usage figure %d should exceed MemFree + inactive_file %d by the kernel's memory and the swap cache", root, free)
	}
	if _, err := RootUsageAvailable([]byte("MemTotal: 100 kB\nanon 1\nfile 2\n")); err == nil {
		t.Error("no inactive_file: want an error")
	}
}
