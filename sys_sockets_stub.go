package main

// listeningOf is a stand-in until the sockets work lands.
func listeningOf(pids []int, most int) ([]string, bool) { return nil, true }
