// Probe: copy stdin to stdout unchanged, then print each argument on its own
// line to stderr.
package main

import (
	"io"
	"os"
)

func main() {
	if _, err := io.Copy(os.Stdout, os.Stdin); err != nil {
		os.Exit(1)
	}
	for _, a := range os.Args[1:] {
		os.Stderr.WriteString(a + "\n")
	}
}
