# raftmq image: the two static binaries on an empty base, nothing else.
#
# No base image is pulled (there is no registry here, and a scratch image
# needs none): the binaries are built outside docker with CGO_ENABLED=0 and
# copied in. Build with
#
#   scripts/docker-build.sh [TAG]          # or: make docker
#
# which compiles bin/raftmq-node and bin/raftmq into a temporary build
# context next to this file and runs `docker build`. See docker-compose.yml
# for a three-node cluster.
FROM scratch
COPY bin/raftmq-node /raftmq-node
COPY bin/raftmq /raftmq
# Raft, gRPC API, HTTP (/healthz, /status, /metrics).
EXPOSE 7001 9001 8001
VOLUME ["/data"]
ENTRYPOINT ["/raftmq-node"]
CMD ["--dir", "/data", "--api-addr", "0.0.0.0:9001", "--http-addr", "0.0.0.0:8001"]
