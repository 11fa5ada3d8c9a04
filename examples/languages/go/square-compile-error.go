package main

import (
	"fmt"
	"os"
	"strconv"
)

// Does not compile: ParseInt returns two values; `err` is unused as well.
func main() {
	n := strconv.ParseInt(os.Args[1], 10, 64)
	fmt.Println(n * n)
}
