// Command workload is the WebAssembly module the pod tests run (built with
// GOOS=wasip1 GOARCH=wasm). Its first argument picks what it does.
package main

import (
	"fmt"
	"os"
	"strings"
	"time"
)

var sink [][]byte

func main() {
	mode := "hello"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "hello":
		fmt.Println("hello from", os.Args[0])
		fmt.Fprintln(os.Stderr, "a line on stderr")
	case "fail":
		fmt.Println("about to fail")
		os.Exit(1)
	case "spin": // an infinite loop that never yields to the host
		n := 0
		for {
			n++
		}
	case "idle": // a pod that runs and waits, as a server would
		fmt.Println("idle")
		for {
			time.Sleep(time.Hour)
		}
	case "hog": // allocate until the memory limit stops it
		for {
			sink = append(sink, make([]byte, 1<<20))
			sink[len(sink)-1][0] = 1
		}
	case "env":
		for _, name := range os.Args[2:] {
			fmt.Printf("%s=%s\n", name, os.Getenv(name))
		}
	case "lines": // many short lines, as fast as it can
		for i := range 2000 {
			fmt.Println("line", i)
		}
	case "args":
		fmt.Println(strings.Join(os.Args, " "))
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		os.Exit(2)
	}
}
