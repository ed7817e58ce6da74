// Package stack grows a new goroutine's stack early, while it is shallow.
//
// A goroutine starts on a 2 KiB stack. When it needs more, the runtime
// allocates a stack twice as large, copies the old one and adjusts every
// frame on it, looking up each frame's pointer maps: the deeper the stack
// when it grows, the dearer the copy. A goroutine known to need more than
// a few KiB (a tool call, the tool loop of a stream) grows once, at its
// start, instead of several times from deep inside its work. CockroachDB's
// growstack package does the same.
package stack

import "runtime"

// Grow makes the calling goroutine's stack at least 8 KiB. Call it first
// thing in a goroutine; on a goroutine whose stack is already large it
// costs a few instructions.
//
//go:noinline
func Grow() {
	var buf [5 << 10]byte
	runtime.KeepAlive(&buf) // the frame must not be optimised away
}
