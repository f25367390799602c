// Package membership tracks the live members of consumer groups: clients
// that announce themselves (heartbeats) join a group and leave it when they
// say so, when their owner removes them (a closed connection), or when
// they have not been heard from for the table's expiry.
//
// A Table is in memory only: it is rebuilt from heartbeats within one
// heartbeat interval after a process starts or leadership moves. It is
// safe for concurrent use; its clock is injected so expiry can be tested.
package membership
