// Package dashboard serves raftmq's web dashboard from the node's HTTP
// address: GET / is a single page (cluster, topics, consumer groups, message
// lookup, live throughput and latency) embedded in the binary with go:embed,
// with no CDN and no network access at run time.
//
// Contract. The page reads JSON under /api/ and refreshes itself every
// second without reloading. Every number comes from the node's own gRPC
// service (the API interface, which *transport.Server implements) or its
// Prometheus registry, so the dashboard shows exactly what the API answers
// on that node:
//
//   - cluster, topics and message lookups are this node's view (a follower
//     says how many Raft entries it is behind the commit index it knows);
//   - consumer groups are leader reads (a follower forwards them), so every
//     node shows the leader's view of offsets, lag and live members;
//   - throughput counts the messages this node's store appended (every
//     replica appends every message); commit latency is measured by the
//     leader only (a follower says so).
//
// Admin actions (create and delete a topic, reset a group's offsets,
// transfer leadership) are POSTs with a JSON body, confirmed in the page
// first; a follower forwards them to the leader as the gRPC service does.
// Without authentication on the node (the default) anyone who reaches the
// HTTP address may use them, as anyone who reaches the API address may.
//
// Errors are JSON {"error": "..."} with the HTTP status of the gRPC code
// (400 bad input, 404 not found, 409 exists, 503 unavailable).
package dashboard
