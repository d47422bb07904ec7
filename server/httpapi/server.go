package httpapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
	"github.com/droverhq/drover/server/httpapi/ui"
)

// Config is what the HTTP server serves.
type Config struct {
	// Addr is the TCP address to listen on.
	Addr string
	// Conn reaches the gRPC services through the gRPC server's
	// interceptors (rpc.Server.DialInProcess); nil serves no /v1/ API.
	Conn *grpc.ClientConn
	// Metrics serves /metrics; nil serves none.
	Metrics http.Handler
	// EnablePprof also serves Go's profiles at /debug/pprof/.
	EnablePprof bool
	// MaxBodyBytes bounds a request body (16 MiB, as the gRPC server's
	// largest request).
	MaxBodyBytes int64
	// Logger receives the server's errors (slog.Default()).
	Logger *slog.Logger
}

const defaultMaxBodyBytes = 16 << 20

// Server is the HTTP server of one drover server.
type Server struct {
	srv      *http.Server
	listener net.Listener
	logger   *slog.Logger
	// longLived is done when Shutdown starts: blocking queries and event
	// streams end then, rather than hold the shutdown up.
	longLived context.Context
	endLong   context.CancelFunc
}

// Listen builds the handlers of cfg and listens on cfg.Addr; Serve
// serves.
func Listen(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = defaultMaxBodyBytes
	}
	longLived, endLong := context.WithCancel(context.WithoutCancel(ctx))
	s := &Server{logger: cfg.Logger, longLived: longLived, endLong: endLong}
	h, err := s.handler(ctx, cfg)
	if err != nil {
		endLong()
		return nil, err
	}
	l, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		endLong()
		return nil, fmt.Errorf("listen for HTTP on %s: %w", cfg.Addr, err)
	}
	s.listener = l
	s.srv = &http.Server{
		Handler: h,
		// No ReadTimeout or WriteTimeout: a blocking query waits up to
		// minutes and the event stream for ever. Slow headers and idle
		// connections are bounded.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    1 << 20,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelWarn),
	}
	return s, nil
}

// handler routes /metrics, pprof, the OpenAPI document, the API and the
// web UI (/ui/; / redirects there).
func (s *Server) handler(ctx context.Context, cfg Config) (http.Handler, error) {
	mux := http.NewServeMux()
	if cfg.Metrics != nil {
		mux.Handle("/metrics", cfg.Metrics)
	}
	if cfg.EnablePprof {
		// Profiles expose internals and cost CPU while taken: only on
		// request, and only on an address operators chose.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	if cfg.Conn == nil {
		return mux, nil
	}
	// The UI only talks to the API, so it is served only with one.
	uiHandler, err := ui.Handler()
	if err != nil {
		return nil, err
	}
	mux.Handle(ui.Prefix, uiHandler)
	mux.Handle("GET /ui", http.RedirectHandler(ui.Prefix, http.StatusMovedPermanently))
	mux.Handle("GET /{$}", http.RedirectHandler(ui.Prefix, http.StatusFound))
	gw, err := newGateway(ctx, cfg.Conn)
	if err != nil {
		return nil, err
	}
	mux.HandleFunc("GET /v1/openapi.json", serveOpenAPI)
	mux.Handle("/v1/", crossOriginGuard().Handler(s.api(gw, cfg.MaxBodyBytes)))
	return mux, nil
}

// crossOriginGuard refuses writes a browser makes for a page of another
// site: without it, any web page an operator opens could register jobs on
// a server without ACLs on the operator's loopback address. Reads, curl
// and other programs are let through.
func crossOriginGuard() *http.CrossOriginProtection {
	guard := http.NewCrossOriginProtection()
	guard.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, status.Errorf(codes.PermissionDenied, "%s %s: cross-origin request from a browser refused", r.Method, r.URL.Path))
	}))
	return guard
}

// api bounds the body, rewrites the query parameters, and ties blocking
// queries and streams to the server's lifetime, in front of the gateway.
func (s *Server) api(gw http.Handler, maxBody int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength > maxBody {
			writeError(w, &runtime.HTTPStatusError{HTTPStatus: http.StatusRequestEntityTooLarge,
				Err: status.Errorf(codes.InvalidArgument, "request body of %d bytes is larger than the %d allowed", r.ContentLength, maxBody)})
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		if isLongLived(r) {
			ctx, cancel := context.WithCancel(r.Context())
			defer cancel()
			stop := context.AfterFunc(s.longLived, cancel)
			defer stop()
			r = r.WithContext(ctx)
		}
		if err := rewriteQuery(r.URL); err != nil {
			writeError(w, status.Error(codes.InvalidArgument, err.Error()))
			return
		}
		gw.ServeHTTP(w, r)
	})
}

// serveOpenAPI answers the OpenAPI document generated with the handlers.
func serveOpenAPI(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(droverv1.OpenAPI())
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.listener.Addr().String() }

// Serve answers requests until Shutdown.
func (s *Server) Serve() error {
	if err := s.srv.Serve(s.listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve HTTP on %s: %w", s.Addr(), err)
	}
	return nil
}

// Shutdown ends blocking queries and event streams at once, lets other
// requests finish until ctx ends, then closes every connection.
func (s *Server) Shutdown(ctx context.Context) error {
	s.endLong()
	if err := s.srv.Shutdown(ctx); err != nil {
		_ = s.srv.Close()
		return fmt.Errorf("shut down HTTP on %s: %w", s.Addr(), err)
	}
	return nil
}
