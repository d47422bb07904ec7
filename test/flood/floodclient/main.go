// Command floodclient runs one operator flood (package flood) against a
// drover server and prints its result as JSON on standard output. The
// tests build it without the race detector and run it as a child process.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/droverhq/drover/test/flood"
)

func main() {
	var cfg flood.Config
	var pageSize int
	flag.StringVar(&cfg.Addr, "addr", "", "gRPC address of the server to flood")
	flag.IntVar(&cfg.Conns, "conns", 400, "client connections")
	flag.DurationVar(&cfg.Window, "window", 15*time.Second, "how long new calls are started")
	flag.DurationVar(&cfg.CallTimeout, "call-timeout", 5*time.Second, "each call's deadline")
	flag.IntVar(&pageSize, "page-size", 2000, "nodes asked for per call")
	flag.Parse()
	cfg.PageSize = int32(min(max(pageSize, 1), 1<<30))
	if cfg.Addr == "" || cfg.Conns < 1 || cfg.Window <= 0 || cfg.CallTimeout <= 0 {
		fmt.Fprintln(os.Stderr, "floodclient: -addr is required; -conns, -window and -call-timeout must be above 0")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := flood.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
