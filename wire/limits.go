package wire

// gRPC message size limits, shared by the server and its clients.
const (
	// MaxPullBytes bounds the record bytes of one Pull answer (at least one
	// message is returned whatever its max_bytes).
	MaxPullBytes = 64 << 20
	// MaxRequestBytes is the gRPC limit of a request: what the server
	// receives (ServerOptions.MaxRecvMsgSize) and the Go client and the
	// follower-to-leader forward send. A Send of 64 MiB fits; the Producer
	// and the CLI cut their batches far below it.
	MaxRequestBytes = 64 << 20
	// MaxResponseBytes is the gRPC limit of an answer: what the server sends
	// and the Go client and the forward receive. The largest Pull answer
	// (MaxPullBytes of records) with its framing fits. A 4 MiB body always
	// fits a Send, a Pull (which returns at least one message whatever its
	// max_bytes) and a query.
	MaxResponseBytes = MaxPullBytes + 1<<20
)
