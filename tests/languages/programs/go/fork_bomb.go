// Probe: start copies of itself (fork+exec of /proc/self/exe) without bound;
// the copies just sleep. When starting one fails (pids limit), print
// "contained" and exit 0.
package main

import (
	"fmt"
	"os"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "child" {
		time.Sleep(5 * time.Second)
		return
	}
	self := "/proc/self/exe"
	attr := &syscall.ProcAttr{Env: []string{"GOMAXPROCS=1"}}
	for i := 0; i < 100000; i++ {
		if _, err := syscall.ForkExec(self, []string{self, "child"}, attr); err != nil {
			fmt.Fprintf(os.Stderr, "fork/exec failed after %d children: %v\n", i, err)
			fmt.Println("contained")
			os.Exit(0)
		}
	}
	fmt.Println("not contained")
	os.Exit(1)
}
