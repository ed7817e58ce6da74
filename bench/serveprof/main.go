// Command serveprof runs agentry's server (server.New, as `agentry serve`
// builds it, with the built-in store workflow) in-process under the Go
// CPU profiler, and writes a heap profile at exit, for profiling the
// server that bench/uaip.sh measures without adding anything to the
// product:
//
//	serveprof -cpuprofile cpu.pprof -memprofile heap.pprof -addr 127.0.0.1:8080 -store memory:
//	go tool pprof -top cpu.pprof
//
// SIGINT or SIGTERM stop the server gracefully and then the profiles are
// written.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/agentry-dev/agentry/internal/builtin"
	"github.com/agentry-dev/agentry/server"
	"github.com/agentry-dev/agentry/store"
	"github.com/agentry-dev/agentry/workflow"
)

func main() {
	cpu := flag.String("cpuprofile", "", "write a CPU profile to this file")
	mem := flag.String("memprofile", "", "write a heap profile to this file at exit")
	addr := flag.String("addr", server.DefaultAddr, "listen address")
	storeURL := flag.String("store", "memory:", "store URL (store.Open)")
	gc := flag.Int("gc-percent", 200, "garbage collector target, as agentry serve's --gc-percent")
	flag.Parse()
	if err := run(*cpu, *mem, *addr, *storeURL, *gc); err != nil {
		fmt.Fprintln(os.Stderr, "serveprof:", err)
		os.Exit(1)
	}
}

func run(cpu, mem, addr, storeURL string, gc int) error {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gc)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	st, err := store.Open(ctx, storeURL)
	if err != nil {
		return err
	}
	defer st.Close()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	srv, err := server.New(ctx, &server.Config{Store: st, Workflows: []*workflow.Workflow{builtin.Store()}, Addr: addr, Logger: logger})
	if err != nil {
		return err
	}
	if cpu != "" {
		f, err := os.Create(cpu)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "serveprof: serving on http://%s\n", addr)
	err = srv.Serve(ctx)
	if serr := srv.Shutdown(context.Background()); err == nil {
		err = serr
	}
	if cpu != "" {
		pprof.StopCPUProfile()
	}
	if mem != "" {
		runtime.GC()
		f, ferr := os.Create(mem)
		if ferr == nil {
			ferr = pprof.WriteHeapProfile(f)
			f.Close()
		}
		if err == nil {
			err = ferr
		}
	}
	return err
}
