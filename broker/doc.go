// Package broker serves Apache RocketMQ's broker and name-server protocols
// (package remoting) over raftmq, so that unchanged RocketMQ clients
// produce to a raftmq cluster and read its queues' offsets.
//
// # Routing
//
// A raftmq cluster is one RocketMQ broker name: the Raft leader is its
// brokerId 0 (where RocketMQ producers send), the other members are ids 1,
// 2, ... in the order of their member ids. Every node answers
// GET_ROUTEINFO_BY_TOPIC on its name-server and its broker address, from the
// member map and each member's --remoting-addr (Backend.Brokers). A topic
// the store does not know answers TOPIC_NOT_EXIST; the client then asks for
// the default topic (TBW102), which is answered with the store's default
// queue count while topics are created on first use, so the first send
// creates the topic as RocketMQ does.
//
// # Sends
//
// SEND_MESSAGE, SEND_MESSAGE_V2 and SEND_BATCH_MESSAGE become one
// Backend.Send each: topic, queue, flag, system flag, born timestamp,
// reconsume times, body and properties are stored as given (UNIQ_KEY, the
// client's message id, is the message's msgId over gRPC too), the born host
// is the client connection's address. The answer carries msgId (the offset
// message id; comma-separated for a batch), queueId and queueOffset (of the
// first message). Routes refresh only every 30 s in the clients, so a
// member that is not the leader relays a send to the leader's broker
// address and returns its answer; with no leader it answers
// SERVICE_NOT_AVAILABLE, which the client retries.
//
// # Errors
//
// A request that cannot be parsed gets MESSAGE_ILLEGAL (sends) or
// SYSTEM_ERROR with the reason; a refusal of the store maps to its RocketMQ
// code (TOPIC_NOT_EXIST, MESSAGE_ILLEGAL); an overloaded or full node
// answers SYSTEM_BUSY; a send whose outcome is unknown (leadership lost
// while committing) answers SYSTEM_ERROR, and RocketMQ's client then
// retries it, which may store it twice, as with RocketMQ itself. Codes this
// package does not serve answer REQUEST_CODE_NOT_SUPPORTED.
package broker
