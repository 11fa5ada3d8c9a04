package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
)

// Wrong: subtracts every other number.
func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Split(bufio.ScanWords)
	var total int64
	sign := int64(1)
	for sc.Scan() {
		x, _ := strconv.ParseInt(sc.Text(), 10, 64)
		total += sign * x
		sign = -sign
	}
	fmt.Println(total)
}
