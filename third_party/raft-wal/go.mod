module github.com/hashicorp/raft-wal

go 1.18

require (
	github.com/armon/go-metrics v0.4.1
	github.com/benbjohnson/immutable v0.4.0
	github.com/coreos/etcd v3.3.27+incompatible
	github.com/hashicorp/go-hclog v1.6.3
	github.com/hashicorp/go-msgpack v1.1.5 // as upstream v0.4.0 selects it
	github.com/hashicorp/raft v1.8.0
	go.etcd.io/bbolt v1.5.0
)
