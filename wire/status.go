package wire

// Suffrage of a member, as in raft.Configuration.
const (
	SuffrageVoter    = "voter"
	SuffrageNonvoter = "nonvoter"
	SuffrageStaging  = "staging"
)

// Member is one server of the Raft configuration.
type Member struct {
	ID       string
	RaftAddr string
	APIAddr  string // "" if unknown
	Suffrage string // SuffrageVoter, SuffrageNonvoter or SuffrageStaging
}

// ClusterStatus is a node's view of itself and the cluster.
type ClusterStatus struct {
	ID             string
	State          string // raft.RaftState.String(): "Leader", "Follower", "Candidate", "Shutdown"
	LeaderID       string // "" if none known
	LeaderRaftAddr string
	LeaderAPIAddr  string
	Term           uint64
	CommitIndex    uint64
	AppliedIndex   uint64
	ConfirmOffset  int64
	MinOffset      int64
	MaxOffset      int64
	Members        []Member
	// DiskUsedPercent is the used share of the disk holding the node's
	// store (0 when unknown), 100 while it waits for space to apply.
	DiskUsedPercent int
	// RemotingAddr is where the node serves RocketMQ's broker protocol
	// ("" when off).
	RemotingAddr string
}

// HasLeader reports whether a leader is known.
func (s ClusterStatus) HasLeader() bool { return s.LeaderID != "" || s.LeaderAPIAddr != "" }
