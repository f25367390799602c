package client

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/raftmq/raftmq/wire"
)

// bearerToken is a grpc credentials.PerRPCCredentials that puts
// "authorization: Bearer <token>" in the metadata of every call, unary and
// streaming.
type bearerToken struct{ header string }

// newBearerToken checks that token can travel in an HTTP/2 header (visible
// ASCII, no spaces) and returns its credentials.
func newBearerToken(token string) (bearerToken, error) {
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= ' ' || c > '~' {
			return bearerToken{}, fmt.Errorf("%w: Options.Token has a character a header cannot carry at byte %d", ErrInvalid, i)
		}
	}
	return bearerToken{header: "Bearer " + token}, nil
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (b bearerToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": b.header}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials: it is
// false so that a token also works over plaintext (Options.Token says why
// that is unsafe on an untrusted network).
func (bearerToken) RequireTransportSecurity() bool { return false }

// dialOptions are the options every connection is dialled with: transport
// credentials (TLS when o.TLS is set), the token's per-call credentials,
// message sizes, codec and windows, then o.DialOptions (which override the
// ones before them).
func (o *Options) dialOptions() ([]grpc.DialOption, error) {
	creds := insecure.NewCredentials()
	if o.TLS != nil {
		creds = credentials.NewTLS(o.TLS)
	}
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(wire.MaxResponseBytes), grpc.MaxCallSendMsgSize(wire.MaxRequestBytes),
			grpc.ForceCodecV2(newPullCodec())),
		// Pull answers are ~1 MiB (up to 4 MiB by default): read them
		// in fewer syscalls, and open windows that hold a whole answer
		// so the server need not wait for window updates mid-answer.
		grpc.WithReadBufferSize(512 << 10),
		grpc.WithInitialWindowSize(4 << 20), grpc.WithInitialConnWindowSize(16 << 20),
	}
	if o.Token != "" {
		tok, err := newBearerToken(o.Token)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithPerRPCCredentials(tok))
	}
	return append(opts, o.DialOptions...), nil
}
