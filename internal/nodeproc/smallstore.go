package nodeproc

import (
	"fmt"
	"os"
	"path/filepath"
)

// SmallStoreTOML is a raftmq-node config file with small store files: 64 MiB
// commitlog segments (instead of 1 GiB), small consume-queue and index
// files, and no pre-touching of preallocated segments. A test cluster with
// the defaults writes over 1 GiB per node; with this, about 150 MiB.
const SmallStoreTOML = `# written by internal/nodeproc for test clusters
[store]
CommitLogFileSize = 67108864
ConsumeQueueFileSize = 600000
IndexMaxHashSlots = 50000
IndexMaxIndexes = 200000
PreTouch = false
`

// SmallStoreArgs writes SmallStoreTOML into dir and returns the flags that
// load it (for Spec.Args or ClusterOptions.Args). Every node of a cluster
// must use the same store sizes.
func SmallStoreArgs(dir string) ([]string, error) {
	path := filepath.Join(dir, "small-store.toml")
	if err := os.WriteFile(path, []byte(SmallStoreTOML), 0o644); err != nil {
		return nil, fmt.Errorf("nodeproc: %w", err)
	}
	return []string{"--config", path}, nil
}
