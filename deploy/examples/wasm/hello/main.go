// Command hello is jetplane's example workload: a plain Go program built
// as a WebAssembly (WASI) module and run as a Pod.
//
//	GOOS=wasip1 GOARCH=wasm go build -o hello.wasm ./deploy/examples/wasm/hello
//	jetplane image push hello.wasm hello:v1
//	jetplane apply -f deploy/examples/wasm/pod.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"time"
)

func main() {
	n := flag.Int("n", 3, "how many greetings to print")
	every := flag.Duration("every", 100*time.Millisecond, "pause between greetings")
	flag.Parse()
	who := os.Getenv("GREETING_NAME")
	if who == "" {
		who = "world"
	}
	for i := 1; i <= *n; i++ {
		fmt.Printf("hello, %s (%d/%d)\n", who, i, *n)
		if i < *n {
			time.Sleep(*every)
		}
	}
}
