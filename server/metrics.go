package server

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"

	"github.com/droverhq/drover/server/httpapi"
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

// httpServer is the HTTP server on the HTTP address, when one is
// configured: the JSON API, /metrics and, with EnablePprof, /debug/pprof/.
type httpServer struct {
	api *httpapi.Server
	// conn is the API's in-process connection to the gRPC server.
	conn *grpc.ClientConn
}

func (s *Server) startHTTP() (*httpServer, error) {
	if s.cfg.HTTPAddr == "" {
		return nil, nil
	}
	conn, err := s.rpc.DialInProcess()
	if err != nil {
		return nil, err
	}
	api, err := httpapi.Listen(s.lifetime, httpapi.Config{
		Addr:        s.cfg.HTTPAddr,
		Conn:        conn,
		Metrics:     promhttp.HandlerFor(s.metrics, promhttp.HandlerOpts{ErrorLog: slogPrinter{s}}),
		EnablePprof: s.cfg.EnablePprof,
		Logger:      s.logger.With("component", "http"),
	})
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	h := &httpServer{api: api, conn: conn}
	s.wg.Go(func() {
		if err := api.Serve(); err != nil {
			s.logger.Error("HTTP server failed", "err", err)
		}
	})
	s.logger.Info("serving HTTP API and metrics", "addr", api.Addr())
	return h, nil
}

// addr is the bound HTTP address, or "" when HTTP is off.
func (h *httpServer) addr() string {
	if h == nil {
		return ""
	}
	return h.api.Addr()
}

// stop ends the HTTP server and its connection to the gRPC server.
func (h *httpServer) stop(ctx context.Context) {
	if h == nil {
		return
	}
	_ = h.api.Shutdown(ctx)
	_ = h.conn.Close()
}

// slogPrinter passes promhttp's error lines to the server's log.
type slogPrinter struct{ s *Server }

func (p slogPrinter) Println(v ...any) { p.s.logger.Error("metrics endpoint", "err", fmt.Sprint(v...)) }

// HTTPAddr is the bound address of the HTTP API and metrics, or "" when
// it is off.
func (s *Server) HTTPAddr() string { return s.http.addr() }

// Registry is the server's Prometheus registry, for collectors that live
// outside the server (raft's process-wide metrics).
func (s *Server) Registry() *prometheus.Registry { return s.metrics }
