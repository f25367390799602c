// Package raftmqv1 holds the protobuf and gRPC definitions of raftmq's client
// API (raftmq.proto) and the Go code generated from them. The generated files
// are committed; regenerate with `make proto` (needs protoc, protoc-gen-go
// v1.36.12 and protoc-gen-go-grpc v1.6.0).
package raftmqv1

//go:generate protoc -I . --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative raftmq.proto
