#!/bin/sh
# Build the raftmq image (FROM scratch) without pulling anything: compile
# static binaries with CGO_ENABLED=0, put them and the Dockerfile into a
# temporary build context, and run `docker build` on it.
#
#   scripts/docker-build.sh [TAG]      # TAG defaults to raftmq:latest
set -eu
tag=${1:-raftmq:latest}
root=$(cd "$(dirname "$0")/.." && pwd)
ctx=$(mktemp -d "${TMPDIR:-/tmp}/raftmq-docker.XXXXXX")
trap 'rm -rf "$ctx"' EXIT INT TERM
cd "$root"
# --version reports the commit even where the build has no VCS stamp.
commit=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
ldflags="-s -w -X github.com/raftmq/raftmq/internal/buildinfo.Commit=$commit"
CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$ctx/bin/raftmq-node" ./cmd/node
CGO_ENABLED=0 go build -trimpath -ldflags="$ldflags" -o "$ctx/bin/raftmq" ./cmd/raftmq
cp Dockerfile .dockerignore "$ctx/"
docker build -q -t "$tag" "$ctx"
echo "built image $tag"
