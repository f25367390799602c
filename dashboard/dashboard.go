package dashboard

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/raftmq/raftmq/proto/raftmq/v1"
)

//go:embed static
var static embed.FS

// API is the part of the node's gRPC service the dashboard reads and
// administers through; *transport.Server implements it (its follower
// forwarding and leader reads included).
type API interface {
	Status(context.Context, *pb.StatusRequest) (*pb.StatusResponse, error)
	ListTopics(context.Context, *pb.ListTopicsRequest) (*pb.ListTopicsResponse, error)
	DescribeTopic(context.Context, *pb.DescribeTopicRequest) (*pb.TopicInfo, error)
	ListGroups(context.Context, *pb.ListGroupsRequest) (*pb.ListGroupsResponse, error)
	DescribeGroup(context.Context, *pb.DescribeGroupRequest) (*pb.DescribeGroupResponse, error)
	JoinGroup(context.Context, *pb.JoinGroupRequest) (*pb.JoinGroupResponse, error)
	QueryByMsgID(context.Context, *pb.QueryByMsgIDRequest) (*pb.QueryMessagesResponse, error)
	QueryByKey(context.Context, *pb.QueryByKeyRequest) (*pb.QueryMessagesResponse, error)
	QueryByOffset(context.Context, *pb.QueryByOffsetRequest) (*pb.QueryMessagesResponse, error)
	Pull(context.Context, *pb.PullRequest) (*pb.PullResponse, error)
	CreateTopic(context.Context, *pb.CreateTopicRequest) (*pb.CreateTopicResponse, error)
	DeleteTopic(context.Context, *pb.DeleteTopicRequest) (*pb.DeleteTopicResponse, error)
	CommitOffset(context.Context, *pb.CommitOffsetRequest) (*pb.CommitOffsetResponse, error)
	Transfer(context.Context, *pb.TransferRequest) (*pb.TransferResponse, error)
}

// Options configure a Dashboard.
type Options struct {
	API     API
	Metrics prometheus.Gatherer
	Logger  hclog.Logger
	// Timeout bounds each API call a request makes (default 5 s).
	Timeout time.Duration
}

// Dashboard is the handler set; it owns no goroutines.
type Dashboard struct {
	api     API
	metrics prometheus.Gatherer
	log     hclog.Logger
	timeout time.Duration
	assets  http.Handler
}

// New returns a Dashboard over opts.
func New(opts Options) *Dashboard {
	d := &Dashboard{api: opts.API, metrics: opts.Metrics, log: opts.Logger, timeout: opts.Timeout}
	if d.log == nil {
		d.log = hclog.NewNullLogger()
	}
	if d.timeout <= 0 {
		d.timeout = 5 * time.Second
	}
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	d.assets = http.FileServerFS(sub)
	return d
}

// Register adds the dashboard's routes to mux: GET / (the page), its
// assets under /ui/ and the JSON under /api/.
func (d *Dashboard) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", d.page)
	mux.Handle("GET /ui/", http.StripPrefix("/ui/", d.assets))
	mux.HandleFunc("GET /api/status", d.getStatus)
	mux.HandleFunc("GET /api/topics", d.getTopics)
	mux.HandleFunc("GET /api/groups", d.getGroups)
	mux.HandleFunc("GET /api/messages", d.getMessages)
	mux.HandleFunc("GET /api/metrics", d.getMetrics)
	mux.Handle("POST /api/topics", adminAction(d, "topic created", d.createTopic))
	mux.Handle("POST /api/topics/delete", adminAction(d, "topic deleted", d.deleteTopic))
	mux.Handle("POST /api/groups/reset", adminAction(d, "group offsets reset", d.resetGroup))
	mux.Handle("POST /api/transfer", adminAction(d, "leadership transferred", d.transfer))
}

func (d *Dashboard) page(w http.ResponseWriter, r *http.Request) {
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/"
	w.Header().Set("Cache-Control", "no-cache")
	d.assets.ServeHTTP(w, r2)
}

func (d *Dashboard) ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), d.timeout)
}

// marshal renders protobuf messages with their proto field names in
// lowerCamelCase, zero values included; 64-bit integers are JSON strings
// (protojson's rule), which the page converts.
var marshal = protojson.MarshalOptions{EmitUnpopulated: true}

// writeJSON answers v: a proto.Message, or a value whose fields are
// json.RawMessage built by protoJSON, or plain Go values.
func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if m, ok := v.(proto.Message); ok {
		b, err := marshal.Marshal(m)
		if err != nil {
			writeError(w, err)
			return
		}
		_, _ = w.Write(b)
		return
	}
	_ = json.NewEncoder(w).Encode(v)
}

func protoJSON(m proto.Message) json.RawMessage {
	b, err := marshal.Marshal(m)
	if err != nil {
		return json.RawMessage(`null`)
	}
	return b
}

// httpStatus maps a gRPC error to the HTTP status the page shows.
func httpStatus(err error) int {
	var bad *badRequest
	if errors.As(err, &bad) {
		return http.StatusBadRequest
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.OutOfRange, codes.FailedPrecondition:
		return http.StatusBadRequest
	case codes.NotFound:
		return http.StatusNotFound
	case codes.AlreadyExists:
		return http.StatusConflict
	case codes.ResourceExhausted:
		return http.StatusTooManyRequests
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.DeadlineExceeded:
		return http.StatusGatewayTimeout
	default:
		return http.StatusServiceUnavailable
	}
}

// badRequest is input the dashboard itself refuses.
type badRequest struct{ msg string }

func (e *badRequest) Error() string { return e.msg }

func badf(format string, args ...any) error { return &badRequest{fmt.Sprintf(format, args...)} }

func writeError(w http.ResponseWriter, err error) {
	msg := err.Error()
	if s, ok := status.FromError(err); ok {
		msg = s.Message()
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(httpStatus(err))
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// maxBody bounds an admin request's JSON body.
const maxBody = 64 << 10

// decodeAdmin reads an admin POST's JSON body into v. It requires the JSON
// content type, which a cross-site form cannot send without a CORS
// preflight that this server never grants.
func decodeAdmin(r *http.Request, v any) error {
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		return badf("admin requests need Content-Type application/json, got %q", ct)
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badf("bad JSON body: %v", err)
	}
	return nil
}
