package main

import (
	"fmt"
	"os"
)

// Wrong: swaps only the first and last characters.
func main() {
	r := []rune(os.Args[1])
	r[0], r[len(r)-1] = r[len(r)-1], r[0]
	fmt.Println(string(r))
}
