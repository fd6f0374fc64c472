package main

import (
	"strconv"
	"testing"
)

// TestForgottenIDsRememberTheLatest: the last expiredRemembered ids are
// remembered, older ones go first, and an id added again keeps one place.
func TestForgottenIDsRememberTheLatest(t *testing.T) {
	t.Parallel()
	var e expiredJobs
	for i := 0; i < expiredRemembered+1000; i++ {
		e.add(strconv.Itoa(i), "why")
		e.add(strconv.Itoa(i), "why again")
	}
	for _, id := range []int{0, 999} {
		if _, ok := e.why[strconv.Itoa(id)]; ok {
			t.Errorf("id %d is still remembered", id)
		}
	}
	for _, id := range []int{1000, expiredRemembered + 999} {
		if why := e.why[strconv.Itoa(id)]; why != "why again" {
			t.Errorf("id %d: %q", id, why)
		}
	}
	if len(e.order) != expiredRemembered || len(e.why) != expiredRemembered {
		t.Errorf("%d ids in order, %d remembered; want %d", len(e.order), len(e.why), expiredRemembered)
	}
}
