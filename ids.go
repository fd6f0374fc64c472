// Unguessable ids, for jobs and sessions where clients could try each
// other's.

package main

import (
	"crypto/rand"
	"encoding/hex"
)

// randomID is 128 random bits in hex: unguessable job and session ids.
func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails: crypto/rand panics rather than return an error
	return hex.EncodeToString(b[:])
}
