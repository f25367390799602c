// Package auth decides who may do what: it reads the auth file (TOML),
// authenticates a request's credential — a bearer token, a verified client
// certificate's name, or a RocketMQ AccessKey and HMAC signature — to a
// Principal, and answers whether that principal holds a role on a topic or
// consumer group.
//
// The file:
//
//	# the secret nodes present to each other (API calls between nodes);
//	# the file is the cluster's key: keep it mode 0600
//	node_token = "a long random string"
//
//	[[users]]
//	name = "orders-service"
//	token_sha256 = "hex SHA-256 of the token" # raftmq auth token prints both
//	cert_cn = "orders-service"                # or: a client certificate's Common Name
//	access_key = "AK"                         # or: RocketMQ ACL credentials
//	secret_key = "SK"
//	expires = 2027-06-30T00:00:00Z            # optional
//	revoked = false
//	admin = false                             # membership, topics, transfer, group reset, pprof
//	produce = ["orders", "orders-*"]          # topic patterns (path.Match, "*" for all)
//	consume = ["orders"]                      # topic patterns
//	groups = ["billing", "audit-*"]           # consumer-group patterns
//	produce_messages_per_second = 5000        # this user's quota instead of the
//	produce_bytes_per_second = 0              # node's [limits] (0: those)
//
// Tokens are random (raftmq auth token makes 256-bit ones), so the file
// keeps only their SHA-256; RocketMQ's signature is an HMAC, so a secret
// key must be stored as is. Reload reads the file again (a node does on
// SIGHUP): revoking a user, or letting its expiry pass, refuses its next
// request. A file that fails to load keeps the old policy in force.
//
// Errors are ErrUnauthenticated (no or unknown credential), ErrExpired,
// ErrRevoked and ErrDenied (authenticated, not allowed), each wrapped with
// what was refused.
package auth
