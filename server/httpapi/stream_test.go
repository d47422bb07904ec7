package httpapi

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	droverv1 "github.com/droverhq/drover/proto/drover/v1"
)

// fakeEvents sends one batch, then waits for the caller to go away.
type fakeEvents struct {
	droverv1.UnimplementedEventServiceServer
	from  chan uint64
	ended chan struct{}
}

func (f *fakeEvents) Stream(req *droverv1.StreamEventsRequest, ss grpc.ServerStreamingServer[droverv1.StreamEventsResponse]) error {
	f.from <- req.GetFromIndex()
	if err := ss.Send(&droverv1.StreamEventsResponse{Index: 7, Events: []*droverv1.Event{{Topic: droverv1.Topic_TOPIC_JOB, Type: "JobRegistered", Key: "web"}}}); err != nil {
		return err
	}
	<-ss.Context().Done()
	close(f.ended)
	return ss.Context().Err()
}

// TestEventStreamFlushesAndEndsWithTheClient checks that each batch
// reaches the client as a line as soon as it is sent, while the stream is
// still open, and that the call ends when the client goes away.
func TestEventStreamFlushesAndEndsWithTheClient(t *testing.T) {
	fake := &fakeEvents{from: make(chan uint64, 1), ended: make(chan struct{})}
	gs := grpc.NewServer()
	droverv1.RegisterEventServiceServer(gs, fake)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = gs.Serve(l) }()
	defer gs.Stop()
	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	s, err := Listen(t.Context(), Config{Addr: "127.0.0.1:0", Conn: conn})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.Serve() }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	}()

	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	streamCtx, leave := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(streamCtx, "GET", "http://"+s.Addr()+"/v1/event/stream?index=5&topics=TOPIC_JOB", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if from := <-fake.from; from != 5 {
		t.Errorf("from_index %d, want 5 (from ?index)", from)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	want := `{"result":{"events":[{"topic":"TOPIC_JOB","type":"JobRegistered","key":"web"}],"index":"7"}}`
	if strings.TrimSpace(line) != want {
		t.Errorf("line %s, want %s", line, want)
	}
	leave()
	select {
	case <-fake.ended:
	case <-ctx.Done():
		t.Fatal("the stream did not end when the client went away")
	}
}
