//go:build !linux

package main

// socketDelivery cannot tell here: a peer's close is seen when a later
// write fails.
func socketDelivery(int) delivery { return deliveryUnknown }
