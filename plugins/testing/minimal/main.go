package main

import "os"

func main() {
	_, _ = os.Stdout.WriteString("minimal\n")
}
