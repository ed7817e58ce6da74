// Command serveprof runs `agentry serve` in-process under the Go CPU
// profiler (and writes a heap profile at exit), for profiling the server
// that bench/uaip.sh measures without adding anything to the product:
//
//	serveprof -cpuprofile cpu.pprof -memprofile heap.pprof -- --addr 127.0.0.1:0 --store memory:
//	go tool pprof -top cpu.pprof
//
// The arguments after the flags are those of `agentry serve`. SIGINT or
// SIGTERM stop the server gracefully and then the profiles are written.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/agentry-dev/agentry/internal/cli"
)

func main() {
	cpu := flag.String("cpuprofile", "", "write a CPU profile to this file")
	mem := flag.String("memprofile", "", "write a heap profile to this file at exit")
	flag.Parse()
	if *cpu != "" {
		f, err := os.Create(*cpu)
		if err != nil {
			fmt.Fprintln(os.Stderr, "serveprof:", err)
			os.Exit(1)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "serveprof:", err)
			os.Exit(1)
		}
		defer f.Close()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, append([]string{"serve"}, flag.Args()...), os.Stdin, os.Stdout, os.Stderr)
	stop()
	if *cpu != "" {
		pprof.StopCPUProfile()
	}
	if *mem != "" {
		runtime.GC()
		f, err := os.Create(*mem)
		if err == nil {
			err = pprof.WriteHeapProfile(f)
			f.Close()
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "serveprof:", err)
			code = 1
		}
	}
	os.Exit(code)
}
