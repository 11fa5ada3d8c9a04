// Probe: try TCP connections to 1.1.1.1:53 and 127.0.0.1:9 (2 s timeout
// each); print "unreachable" if both fail, else "reachable".
package main

import (
	"fmt"
	"net"
	"time"
)

func tryConnect(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func main() {
	a := tryConnect("1.1.1.1:53")
	b := tryConnect("127.0.0.1:9")
	if a || b {
		fmt.Println("reachable")
	} else {
		fmt.Println("unreachable")
	}
}
