package rpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// ClientDialOptions are the dial options every drover client uses: creds
// (plaintext when nil), drover's Codec, and a receive limit as large as the
// servers' send limit, so that a large answer (a node's allocations, a
// long list page) the server may send is not refused by the client's
// default 4 MiB limit, and unary calls the server refused for its
// admission limits are asked again after its retry hint, within the call's
// deadline (NoRefusalRetry turns that off for one call). Callers append
// their own options (keepalives, reconnection backoff) after these.
func ClientDialOptions(creds credentials.TransportCredentials) []grpc.DialOption {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	return []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Codec{}), grpc.MaxCallRecvMsgSize(defaultMaxSendMsgSize)),
		grpc.WithChainUnaryInterceptor(retryRefused),
	}
}

// TokenCredentials sends secret as the caller's ACL token with every call.
// It is allowed over plaintext too, where a development cluster runs.
func TokenCredentials(secret string) credentials.PerRPCCredentials { return tokenCredentials(secret) }

type tokenCredentials string

func (t tokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{TokenMetadataKey: string(t)}, nil
}

func (t tokenCredentials) RequireTransportSecurity() bool { return false }
