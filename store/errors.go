package store

import "errors"

var (
	ErrClosed          = errors.New("store: closed")
	ErrAlreadyApplied  = errors.New("store: raft index already applied")
	ErrBadTopic        = errors.New("store: illegal topic name")
	ErrNoSuchTopic     = errors.New("store: no such topic")
	ErrBadQueue        = errors.New("store: queue id out of range")
	ErrMessageTooLarge = errors.New("store: message body too large")
	ErrPropsTooLarge   = errors.New("store: properties too large")
	ErrBadOffset       = errors.New("store: offset out of range")
	ErrNotFound        = errors.New("store: not found")
	ErrTopicExists     = errors.New("store: topic exists")
	ErrBadConfig       = errors.New("store: bad config")
	ErrBadCommand      = errors.New("store: malformed command")
)
