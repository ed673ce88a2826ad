// SPDX-License-Identifier: Apache-2.0

// Package stack grows a goroutine's stack on purpose: the server and the client use it to move their
// goroutines' stacks (Go copies a stack that outgrows itself) while tlsprof follows them, and to answer
// and check /recurse.
package stack

// Deep returns a checksum of n nested calls, each with a 512-byte frame the compiler cannot elide.
//
//go:noinline
func Deep(n int, seed byte) uint64 {
	var pad [512]byte
	pad[n%len(pad)] = seed
	if n == 0 {
		return uint64(pad[0]) + 1
	}
	return Deep(n-1, seed+1)*31 + uint64(pad[n%len(pad)])
}
