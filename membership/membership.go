package membership

import (
	"slices"
	"sync"
	"time"
)

// Table is the members of every group, each with a value its owner keeps
// (a connection, or nothing).
type Table[V any] struct {
	expiry time.Duration
	now    func() time.Time

	mu     sync.Mutex
	groups map[string]map[string]entry[V] // group → member id → entry
}

type entry[V any] struct {
	value V
	seen  time.Time
}

// New returns a table whose members expire after expiry without a
// heartbeat, reading time from now (time.Now when nil).
func New[V any](expiry time.Duration, now func() time.Time) *Table[V] {
	if now == nil {
		now = time.Now
	}
	return &Table[V]{expiry: expiry, now: now, groups: map[string]map[string]entry[V]{}}
}

// Beat records a heartbeat of id in group with value and reports whether
// id was not a live member before.
func (t *Table[V]) Beat(group, id string, value V) (joined bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.expireLocked(group)
	members := t.groups[group]
	if members == nil {
		members = map[string]entry[V]{}
		t.groups[group] = members
	}
	_, known := members[id]
	members[id] = entry[V]{value: value, seen: t.now()}
	return !known
}

// Leave removes id from group and reports whether it was a member.
func (t *Table[V]) Leave(group, id string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.groups[group][id]; !ok {
		return false
	}
	t.deleteLocked(group, id)
	return true
}

// RemoveIf removes every member whose value drop accepts and returns the
// groups that lost one, sorted.
func (t *Table[V]) RemoveIf(drop func(V) bool) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var changed []string
	for group, members := range t.groups {
		for id, e := range members {
			if drop(e.value) {
				t.deleteLocked(group, id)
				changed = append(changed, group)
			}
		}
	}
	slices.Sort(changed)
	return slices.Compact(changed)
}

// Members is a group's live member ids, sorted.
func (t *Table[V]) Members(group string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.idsLocked(group)
}

// Values is the values of a group's live members, in the order of their
// ids.
func (t *Table[V]) Values(group string) []V {
	t.mu.Lock()
	defer t.mu.Unlock()
	ids := t.idsLocked(group)
	values := make([]V, len(ids))
	for i, id := range ids {
		values[i] = t.groups[group][id].value
	}
	return values
}

// idsLocked expires a group's silent members and returns the others' ids,
// sorted.
func (t *Table[V]) idsLocked(group string) []string {
	t.expireLocked(group)
	ids := make([]string, 0, len(t.groups[group]))
	for id := range t.groups[group] {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Groups is the groups with a live member, sorted.
func (t *Table[V]) Groups() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var names []string
	for group := range t.groups {
		t.expireLocked(group)
		if len(t.groups[group]) > 0 {
			names = append(names, group)
		}
	}
	slices.Sort(names)
	return names
}

func (t *Table[V]) expireLocked(group string) {
	now := t.now()
	for id, e := range t.groups[group] {
		if now.Sub(e.seen) > t.expiry {
			t.deleteLocked(group, id)
		}
	}
}

func (t *Table[V]) deleteLocked(group, id string) {
	delete(t.groups[group], id)
	if len(t.groups[group]) == 0 {
		delete(t.groups, group)
	}
}
