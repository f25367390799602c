.PHONY: all build test vet proto docker

all: build

# Go names a binary after its folder, so each line says the name; the
# commit is stamped for --version also where the build has no VCS stamp.
COMMIT := $(shell git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X github.com/raftmq/raftmq/internal/buildinfo.Commit=$(COMMIT)

build:
	go build -ldflags '$(LDFLAGS)' -o bin/raftmq-node ./cmd/node
	go build -ldflags '$(LDFLAGS)' -o bin/raftmq ./cmd/raftmq

test:
	go test ./...

vet:
	go vet ./...

# Regenerate the gRPC code (committed; CI has no protoc). Needs:
#   apt-get install -y protobuf-compiler
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.0
proto:
	cd proto/raftmq/v1 && PATH="$$PATH:$$(go env GOPATH)/bin" protoc -I . \
		--go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative raftmq.proto

# The FROM-scratch image (static binaries built outside docker, nothing
# pulled); TAG=raftmq:latest by default. docker-compose.yml runs three nodes.
TAG ?= raftmq:latest
docker:
	scripts/docker-build.sh $(TAG)
