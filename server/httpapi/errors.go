package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// ErrorBody is the JSON body of every error answer.
type ErrorBody struct {
	// Code is the gRPC status code's number.
	Code int `json:"code"`
	// Error is the gRPC status code's name, such as NOT_FOUND.
	Error string `json:"error"`
	// Message is the status message, as a gRPC client sees it.
	Message string `json:"message"`
	// Details are the status details (field violations, retry delays) in
	// protobuf's JSON form, with their "@type".
	Details []json.RawMessage `json:"details,omitempty"`
}

// errorBody describes a gRPC status for an HTTP client.
func errorBody(s *status.Status) ErrorBody {
	body := ErrorBody{Code: int(s.Code()), Error: codeName(s.Code()), Message: s.Message()}
	for _, d := range s.Proto().GetDetails() {
		b, err := protojson.MarshalOptions{UseProtoNames: true}.Marshal(d)
		if err != nil {
			continue // a detail of a type this binary does not know
		}
		body.Details = append(body.Details, compact(b))
	}
	return body
}

// codeName is the upper-case name of a code, as the gRPC spec spells it.
func codeName(c codes.Code) string {
	switch c {
	case codes.OK:
		return "OK"
	case codes.Canceled:
		return "CANCELLED"
	case codes.Unknown:
		return "UNKNOWN"
	case codes.InvalidArgument:
		return "INVALID_ARGUMENT"
	case codes.DeadlineExceeded:
		return "DEADLINE_EXCEEDED"
	case codes.NotFound:
		return "NOT_FOUND"
	case codes.AlreadyExists:
		return "ALREADY_EXISTS"
	case codes.PermissionDenied:
		return "PERMISSION_DENIED"
	case codes.ResourceExhausted:
		return "RESOURCE_EXHAUSTED"
	case codes.FailedPrecondition:
		return "FAILED_PRECONDITION"
	case codes.Aborted:
		return "ABORTED"
	case codes.OutOfRange:
		return "OUT_OF_RANGE"
	case codes.Unimplemented:
		return "UNIMPLEMENTED"
	case codes.Internal:
		return "INTERNAL"
	case codes.Unavailable:
		return "UNAVAILABLE"
	case codes.DataLoss:
		return "DATA_LOSS"
	case codes.Unauthenticated:
		return "UNAUTHENTICATED"
	}
	return "CODE_" + strconv.Itoa(int(c))
}

// writeError answers with the error's JSON body and HTTP status. A
// refusal that says when to retry (RetryInfo) sets Retry-After, in whole
// seconds rounded up.
func writeError(w http.ResponseWriter, err error) {
	// The router's own errors (no such path, or not with this method)
	// carry the HTTP status it chose, such as 405.
	var custom *runtime.HTTPStatusError
	if errors.As(err, &custom) {
		err = custom.Err
	}
	s := status.Convert(err)
	h := w.Header()
	h.Del("Trailer")
	h.Del("Transfer-Encoding")
	h.Set("Content-Type", "application/json")
	for _, d := range s.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			delay := ri.GetRetryDelay().AsDuration()
			secs := int64(delay.Seconds())
			if delay > 0 && delay%1e9 != 0 || secs == 0 {
				secs++
			}
			h.Set("Retry-After", strconv.FormatInt(secs, 10))
		}
	}
	if s.Code() == codes.Unauthenticated {
		h.Set("WWW-Authenticate", `Bearer realm="drover"`)
	}
	code := runtime.HTTPStatusFromCode(s.Code())
	if custom != nil {
		code = custom.HTTPStatus
	}
	w.WriteHeader(code)
	b, merr := json.Marshal(errorBody(s))
	if merr != nil {
		return
	}
	_, _ = w.Write(append(b, '\n'))
}

// gatewayError is the gateway's error handler: every failed call, and
// every path or method the API does not have, answers through writeError.
func gatewayError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, _ *http.Request, err error) {
	writeError(w, err)
}

// routingError answers a path the API does not have (404) or a method the
// path does not take (405).
func routingError(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter, r *http.Request, httpStatus int) {
	code := codes.NotFound
	msg := fmt.Sprintf("no API at %s", r.URL.Path)
	if httpStatus == http.StatusMethodNotAllowed {
		code, msg = codes.Unimplemented, fmt.Sprintf("%s does not take %s", r.URL.Path, r.Method)
	}
	writeError(w, &runtime.HTTPStatusError{HTTPStatus: httpStatus, Err: status.Error(code, msg)})
}
