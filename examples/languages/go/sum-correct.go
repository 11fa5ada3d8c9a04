package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
)

func main() {
	sc := bufio.NewScanner(os.Stdin)
	sc.Split(bufio.ScanWords)
	var total int64
	for sc.Scan() {
		x, _ := strconv.ParseInt(sc.Text(), 10, 64)
		total += x
	}
	fmt.Println(total)
}
