package main

import (
	"fmt"
	"os"
)

// Never ends: the indices move the same way, so they never meet.
func main() {
	r := []rune(os.Args[1])
	for i, j := 0, len(r)-1; i < j; i, j = i+1, j+1 {
		r[i%len(r)], r[j%len(r)] = r[j%len(r)], r[i%len(r)]
	}
	fmt.Println(string(r))
}
