// Probe: allocate and touch memory without bound until the container's
// memory cap kills the process (expected: SIGKILL, exit 137, OOMKilled).
package main

const chunk = 16 << 20

var keep [][]byte

func main() {
	for {
		b := make([]byte, chunk)
		for i := 0; i < chunk; i += 4096 {
			b[i] = 1
		}
		keep = append(keep, b)
	}
}
