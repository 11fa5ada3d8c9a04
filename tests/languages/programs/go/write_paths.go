// Probe: try to open for writing (append, create) argv[1], /build/probe and
// /etc/probe; print "denied" or "written" for each, in that order.
package main

import (
	"fmt"
	"os"
)

func attempt(path string) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0644)
	if err != nil {
		fmt.Println("denied")
		return
	}
	f.Close()
	fmt.Println("written")
}

func main() {
	own := ""
	if len(os.Args) > 1 {
		own = os.Args[1]
	}
	attempt(own)
	attempt("/build/probe")
	attempt("/etc/probe")
}
