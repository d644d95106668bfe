// SPDX-License-Identifier: Apache-2.0

package trace

import "syscall"

// newChunk is n bytes outside Go's heap when the kernel gives them (mapped
// true), else on it. Sealed chunks are the bulk of what a trace keeps and
// live for minutes: on the heap, the garbage collector sets its next goal
// at twice what is live (GOGC=100), so a trace kept there cost about twice
// its budget in resident memory; mapped, it costs its pages.
func newChunk(n int) (b []byte, mapped bool) {
	b, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
	if err != nil {
		return make([]byte, n), false
	}
	return b, true
}

// freeChunk returns a mapped chunk to the kernel; nothing may refer to it
// after.
func freeChunk(b []byte) {
	_ = syscall.Munmap(b) // a mapping of ours, whole: no error to act on
}
