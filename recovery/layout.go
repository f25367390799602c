package recovery

// The layout of a store directory: besides the checkpoint (CheckpointName)
// and the abort file (AbortName), one directory per file kind and the
// rebuild marker.
const (
	CommitLogDir    = "commitlog"
	ConsumeQueueDir = "consumequeue"
	IndexDir        = "index"
	// RebuildMarker, present in the store directory, says consume queues
	// and index must be rebuilt from the whole commitlog on open (a
	// snapshot was just installed, or a repair of lagging queues began
	// and may have been cut short). It is removed after the first
	// checkpoint that covers them.
	RebuildMarker = "rebuild"
)
