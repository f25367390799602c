package remoting

// TopicRouteData is GET_ROUTEINFO_BY_TOPIC's answer body (JSON): which
// brokers hold the topic's queues, and where each broker's members listen.
type TopicRouteData struct {
	OrderTopicConf string       `json:"orderTopicConf,omitempty"`
	QueueDatas     []QueueData  `json:"queueDatas"`
	BrokerDatas    []BrokerData `json:"brokerDatas"`
}

// QueueData is one broker's queues of a topic.
type QueueData struct {
	BrokerName     string `json:"brokerName"`
	ReadQueueNums  int32  `json:"readQueueNums"`
	WriteQueueNums int32  `json:"writeQueueNums"`
	Perm           int32  `json:"perm"`
	TopicSynFlag   int32  `json:"topicSynFlag"`
}

// Topic permissions (PermName).
const (
	PermWrite int32 = 1 << 1
	PermRead  int32 = 1 << 2
)

// BrokerData is one broker: its members' addresses by broker id (0 is the
// one producers send to: raftmq's Raft leader).
type BrokerData struct {
	Cluster     string           `json:"cluster"`
	BrokerName  string           `json:"brokerName"`
	BrokerAddrs map[int64]string `json:"brokerAddrs"`
}
