// Package broker serves Apache RocketMQ's broker and name-server protocols
// (package remoting) over raftmq, so that unchanged RocketMQ clients
// produce to and consume from a raftmq cluster.
//
// # Routing
//
// A raftmq cluster is one RocketMQ broker name: the Raft leader is its
// brokerId 0 (where RocketMQ producers send), the other members are ids 1,
// 2, ... in the order of their member ids. Every node answers
// GET_ROUTEINFO_BY_TOPIC on its name-server and its broker address, from the
// member map and each member's --remoting-addr (Backend.Brokers). A member
// that is not the leader asks the leader for the route of a topic its store
// does not hold (it may not have applied the topic's creation yet). A topic
// the leader does not hold either answers TOPIC_NOT_EXIST; the client then
// asks for the default topic (TBW102), which is answered with the store's
// default queue count while topics are created on first use, so the first
// send creates the topic as RocketMQ does. A group's retry topic is routed
// with one queue before it exists.
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
// # Consumers
//
// PULL_MESSAGE answers up to maxMsgNums records of a queue (at most 64, 4
// MiB) packed as the commitlog holds them, filtered by the pull's TAG
// subscription ("a || b"; "" or "*" all; SQL92 is refused with
// SUBSCRIPTION_PARSE_FAIL), with nextBeginOffset, minOffset and maxOffset;
// the end of the queue is PULL_NOT_FOUND, a window filtered out entirely
// PULL_RETRY_IMMEDIATELY, an offset outside the queue PULL_OFFSET_MOVED.
// With the suspend flag an empty answer is held until a message arrives or
// suspendTimeoutMillis (at most 25 s) passes. Every member serves pulls
// from its own store.
//
// Group offsets live in the Raft log: UPDATE_CONSUMER_OFFSET (and the
// commit flag of a pull, on the leader) commits through Backend.CommitOffsets;
// QUERY_CONSUMER_OFFSET reads the local store (QUERY_NOT_FOUND before the
// first commit). A member that is not the leader relays an update.
//
// HEART_BEAT makes its client a member of each consumer group it names on
// this node (clients beat to every broker address of a route, so every
// member knows every client) and creates the group's retry topic,
// %RETRY%<group>, with one queue; GET_CONSUMER_LIST_BY_GROUP lists a
// group's members, sorted; a client leaves on UNREGISTER_CLIENT, when its
// connection closes, or ConsumerExpiry after its last heartbeat. A change
// of membership sends NOTIFY_CONSUMER_IDS_CHANGED to the group's members,
// which then rebalance their queues at once.
//
// CONSUMER_SEND_MSG_BACK stores the message at the given commitlog offset
// again in %RETRY%<group> with its reconsume times raised, RETRY_TOPIC and
// ORIGIN_MESSAGE_ID set and a DELAY level (the request's, else 3 +
// reconsume times; RocketMQ's levels 1 s ... 2 h); a pull of a retry topic
// delivers a record only once its level's delay passed since it was
// stored (records behind it wait too). Past maxReconsumeTimes (default 16)
// or with a negative level the message goes to %DLQ%<group> instead.
//
// # Access control
//
// With Options.Auth set, the broker address checks RocketMQ's ACL 1.0 on
// every request, as RocketMQ's clients sign with primitive.Credentials
// (Java: AclClientRPCHook): the ext fields carry AccessKey and Signature,
// Base64(HMAC-SHA1(SecretKey, the values of AccessKey and every other ext
// field in the order of their sorted keys, then the body)); SecurityToken
// is optional and not signed. A request whose signature does not verify
// against the user's secret_key in the auth file, of an unknown, revoked
// or expired AccessKey, or without one, is answered NO_PERMISSION with
// "...: not authenticated: ..." and nothing else happens. The principal
// must then hold, per code (package auth's roles on topic and group
// patterns; an admin holds all):
//
//	SEND_MESSAGE, _V2, SEND_BATCH_MESSAGE    produce on the topic
//	PULL_MESSAGE, QUERY_/UPDATE_CONSUMER_OFFSET
//	                                         consume on the topic, group on consumerGroup
//	GET_MAX_/GET_MIN_OFFSET, SEARCH_OFFSET_BY_TIMESTAMP
//	                                         consume on the topic
//	HEART_BEAT                               group on each consumer group in the body
//	                                         (a producer's, with none: authenticated only)
//	UNREGISTER_CLIENT, GET_CONSUMER_LIST_BY_GROUP
//	                                         group on consumerGroup
//	CONSUMER_SEND_MSG_BACK                   group on the group, and consume on the
//	                                         topic of the message at the offset sent back
//	GET_ROUTEINFO_BY_TOPIC, any other code   authenticated only
//
// A group's own topics, %RETRY%<group> and %DLQ%<group>, count as
// produced and consumed by whoever holds group on <group>: its consumers
// read its retry topic and send failed messages back to it without being
// granted those topics. A refusal answers NO_PERMISSION with a remark
// naming the principal and what it may not do; Stats counts refusals in
// Denied (Unauthenticated for the failed credentials). Revoking a user or
// letting it expire in the auth file (after Authenticator.Reload) refuses
// its next request. Nothing a client sends can make the broker panic: a
// header or body the check cannot read is answered as the request itself
// would be (MESSAGE_ILLEGAL for sends, SYSTEM_ERROR otherwise).
//
// Relays change the request: the member adds raftmqRelayed, which the
// client did not sign, so the leader could not verify the client's
// signature. The relaying member authorizes the client first, then adds
// RaftmqNodeToken, the auth file's node_token (Authenticator.NodeToken),
// and the leader admits a request marked relayed by that token, compared
// in constant time, as the node principal (every role) instead of by its
// signature. A request marked relayed without the right token (a client
// forging the mark, a member with another auth file, or a cluster without
// node_token) is refused NO_PERMISSION. The token crosses the network in
// each relayed request: when the remoting ports serve TLS, relays dial
// with Options.RelayTLS (remoting.DialTLS).
//
// The name-server handler (NameServer) stays open, as RocketMQ's name
// server checks no ACL: it answers routes only, which name addresses and
// queue counts, and every request to those addresses is checked. A route
// it relays to the leader carries the node token like any relay.
//
// TLS is the listener's (node wraps the broker and name-server listeners
// with tls.NewListener); RocketMQ's Go client turns it on with
// producer.WithTls(true) / consumer.WithTls(true) and then dials both the
// name servers and the brokers over TLS, without verifying the server's
// certificate (the client's code): TLS there hides the traffic, the
// signature authenticates the client.
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
