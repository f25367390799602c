// Package remoting speaks Apache RocketMQ's remoting protocol: the frame,
// its two header encodings, the codes, and a server that reads commands
// from client connections, hands each request to a Handler and writes the
// answer back. It knows nothing of the store: the broker that maps codes to
// raftmq operations sits above it.
//
// # Frame
//
// Every command, request or response, travels as one frame (integers are
// big-endian):
//
//	int32  length        4 + header length + body length (not itself)
//	uint8  serialize     0 JSON, 1 ROCKETMQ (binary)
//	uint24 header length
//	header               per serialize
//	body                 the rest: length - 4 - header length bytes
//
// The JSON header is an object {code, language, version, opaque, flag,
// remark, extFields}; language is a name ("JAVA", "GO"; a number is
// accepted too) and extFields maps strings to strings. The ROCKETMQ header
// is
//
//	int16 code, uint8 language, int16 version, int32 opaque, int32 flag,
//	int32 remark length, remark, int32 extFields length, extFields
//
// where extFields is a sequence of (int16 key length, key, int32 value
// length, value). Flag bit 0 marks a response, bit 1 a one-way request (no
// response). A response carries the request's opaque and, from this
// package, the request's serialize type.
//
// # Contract
//
// Decoding never panics and never allocates more than the frame's bytes
// allow: lengths are checked against what is left before anything is
// sliced, a frame above the reader's limit is refused before its body is
// read, and malformed input returns an error wrapping ErrMalformed or
// ErrFrameTooLarge. A connection whose byte stream cannot be framed is
// closed (there is no way to resynchronise); a well-framed request with an
// unknown code gets a REQUEST_CODE_NOT_SUPPORTED answer from the handler.
//
// # TLS
//
// A Server serves TLS when Serve is given a tls.NewListener (the handshake
// runs on the connection's first read; a client that does not speak TLS is
// disconnected). DialTLS connects a Client over TLS with a *tls.Config,
// completing the handshake before it returns; Dial is plaintext.
// RocketMQ's Go client speaks TLS with its WithTls option.
package remoting
