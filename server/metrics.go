package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// newRegistry builds the server's own Prometheus registry (never the
// global one, so servers in one process do not mix): Go runtime and
// process metrics, and the server's components.
func (s *Server) newRegistry(more ...prometheus.Collector) *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		s.heartbeats,
	)
	reg.MustRegister(s.instr.collectors()...)
	reg.MustRegister(more...)
	return reg
}

// httpServer serves /metrics (and, with EnablePprof, /debug/pprof/) on the
// HTTP address when one is configured.
type httpServer struct {
	srv      *http.Server
	listener net.Listener
}

func (s *Server) startHTTP() (*httpServer, error) {
	if s.cfg.HTTPAddr == "" {
		return nil, nil
	}
	l, err := net.Listen("tcp", s.cfg.HTTPAddr)
	if err != nil {
		return nil, fmt.Errorf("listen for HTTP on %s: %w", s.cfg.HTTPAddr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{ErrorLog: slogPrinter{s}}))
	if s.cfg.EnablePprof {
		// Profiles expose internals and cost CPU while taken: only on
		// request, and only on an address operators chose.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	h := &httpServer{listener: l, srv: &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := h.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.logger.Error("HTTP server failed", "err", err)
		}
	}()
	s.logger.Info("serving metrics", "addr", l.Addr().String())
	return h, nil
}

// addr is the bound HTTP address, or "" when HTTP is off.
func (h *httpServer) addr() string {
	if h == nil {
		return ""
	}
	return h.listener.Addr().String()
}

func (h *httpServer) stop(ctx context.Context) {
	if h != nil {
		_ = h.srv.Shutdown(ctx)
	}
}

// slogPrinter passes promhttp's error lines to the server's log.
type slogPrinter struct{ s *Server }

func (p slogPrinter) Println(v ...any) { p.s.logger.Error("metrics endpoint", "err", fmt.Sprint(v...)) }

// HTTPAddr is the bound address of the metrics endpoint, or "" when it is
// off.
func (s *Server) HTTPAddr() string { return s.http.addr() }

// Registry is the server's Prometheus registry, for collectors that live
// outside the server (raft's process-wide metrics).
func (s *Server) Registry() *prometheus.Registry { return s.metrics }
