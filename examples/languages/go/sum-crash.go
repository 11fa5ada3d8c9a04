package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
)

// Crashes: writes to a nil map (panic).
func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Split(bufio.ScanWords)
	var seen map[string]int64
	var total int64
	for sc.Scan() {
		x, _ := strconv.ParseInt(sc.Text(), 10, 64)
		seen[sc.Text()] = x
		total += x
	}
	seen["total"] = total
	fmt.Println(total)
}
