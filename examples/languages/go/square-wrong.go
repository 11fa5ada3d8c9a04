package main

import (
	"fmt"
	"os"
	"strconv"
)

// Wrong: squares the number plus one.
func main() {
	n, _ := strconv.ParseInt(os.Args[1], 10, 64)
	fmt.Println((n + 1) * n)
}
