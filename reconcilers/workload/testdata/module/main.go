// Command module is the WebAssembly module the workload tests run (built
// with GOOS=wasip1 GOARCH=wasm). Its first argument picks what it does.
package main

import (
	"fmt"
	"os"
	"time"
)

func main() {
	mode := "serve"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	switch mode {
	case "serve": // runs until stopped, as a server would
		fmt.Println("serving", os.Args[1:])
		for {
			time.Sleep(time.Hour)
		}
	case "work": // a Job's task: a moment of work, then success
		time.Sleep(200 * time.Millisecond)
		fmt.Println("done")
	case "fail":
		fmt.Println("failing")
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "unknown mode", mode)
		os.Exit(2)
	}
}
