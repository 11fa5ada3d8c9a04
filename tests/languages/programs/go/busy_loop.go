// Probe: spin forever on the CPU (the global counter keeps the loop from
// being optimised away).
package main

var counter uint64

func main() {
	for {
		counter++
	}
}
