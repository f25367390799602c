package index

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"sync"

	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/vfs"
)

// Service is the set of index files in one directory, oldest first. One
// goroutine writes (PutMessage and the maintenance calls); Query may run
// concurrently.
type Service struct {
	fs  vfs.FS
	cfg Config
	lay layout

	mu     sync.RWMutex
	files  []*file
	closed bool
	// mapped is held for reading by a check of an older file that runs
	// without mu (so puts go on), and for writing while a file is unmapped
	// (remove, Close; mu held): a check never reads an unmapped file.
	mapped sync.RWMutex
}

// FileInfo describes one index file.
type FileInfo struct {
	Name   string
	Header Header
}

// Open loads every index file in cfg.Dir (creating the directory).
func Open(fs vfs.FS, cfg Config) (*Service, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := fs.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("index: mkdir %s: %w", cfg.Dir, err)
	}
	s := &Service{fs: fs, cfg: cfg, lay: layout{slots: cfg.MaxHashSlots, indexes: cfg.MaxIndexes}}
	if err := s.load(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Service) load() error {
	names, err := s.fs.List(s.cfg.Dir)
	if err != nil {
		return fmt.Errorf("index: list %s: %w", s.cfg.Dir, err)
	}
	for _, name := range names { // sorted, and names sort by time
		ts, err := ParseFileName(name)
		if err != nil {
			s.cfg.Logger.Warn("ignoring unexpected file in index directory", "name", name)
			continue
		}
		f, err := s.openFile(name, ts)
		if err != nil {
			return err
		}
		s.files = append(s.files, f)
		f.headerErr = f.checkHeader()
	}
	for _, f := range s.files {
		if f.headerErr != nil {
			// A crash may tear the header of any file the checkpoint does
			// not cover: the newest, and the one before it when the crash
			// came after a roll but before the next flush. RecoverTo
			// removes or rebuilds those; a damaged file it keeps, or any
			// after a clean exit, fails it or TruncateAbove (firstHeaderErr).
			s.cfg.Logger.Warn("index file has an inconsistent header; recovery rebuilds it if the checkpoint does not cover it",
				"path", f.path, "error", f.headerErr)
		}
	}
	return nil
}

// firstHeaderErr is the header error of the oldest file that has one.
func (s *Service) firstHeaderErr() error {
	for _, f := range s.files {
		if f.headerErr != nil {
			return f.headerErr
		}
	}
	return nil
}

func (s *Service) openFile(name string, ts int64) (*file, error) {
	path := filepath.Join(s.cfg.Dir, name)
	mf, err := mmap.Open(s.fs, path, s.lay.size(), mmap.Options{Random: true}) // hash slots: random access
	if err != nil {
		return nil, fmt.Errorf("index: open %s: %w", path, err)
	}
	f := &file{name: name, nameTS: ts, path: path, mf: mf, lay: s.lay}
	f.hdr, _ = DecodeHeader(mf.Bytes())
	return f, nil
}

func (s *Service) newest() *file {
	if len(s.files) == 0 {
		return nil
	}
	return s.files[len(s.files)-1]
}

// PutMessage indexes one message: an entry for uniqKey (if not empty) and one
// for each non-empty key, each as "topic#key". A message at or below the
// newest file's endPhyOffset was indexed already and is skipped, which makes
// re-dispatch after recovery idempotent. (RocketMQ skips only offsets below
// endPhyOffset and so indexes the last message twice on re-dispatch.)
func (s *Service) PutMessage(topic string, keys []string, uniqKey string, phyOffset int64, storeTimestamp int64) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic", ErrArgument)
	}
	var buf [8]int32
	hashes := buf[:0]
	if uniqKey != "" {
		hashes = append(hashes, KeyHash(BuildKey(topic, uniqKey)))
	}
	for _, k := range keys {
		if k != "" {
			hashes = append(hashes, KeyHash(BuildKey(topic, k)))
		}
	}
	return s.PutMessageHashes(hashes, phyOffset, storeTimestamp)
}

func (s *Service) putHash(hash int32, phy, ts int64) error {
	f := s.newest()
	if f == nil || f.full() {
		var err error
		if f, err = s.roll(ts); err != nil {
			return err
		}
	}
	f.put(hash, phy, ts)
	return nil
}

// PutMessageKeys is PutMessage for keys as they lie in a message record:
// keys is the KEYS property value (keys separated by spaces), uniq the
// UNIQ_KEY value. It writes the same entries as PutMessage with the split
// keys, in the same order, and allocates nothing: the hashes of
// "topic#key" are computed over the bytes in place.
func (s *Service) PutMessageKeys(topic, keys, uniq []byte, phyOffset, storeTimestamp int64) error {
	if len(topic) == 0 {
		return fmt.Errorf("%w: empty topic", ErrArgument)
	}
	var buf [8]int32
	return s.PutMessageHashes(MessageKeyHashes(buf[:0], topic, keys, uniq), phyOffset, storeTimestamp)
}

// MessageKeyHashes appends to dst the stored hashes (KeyHash) of the index
// keys of a message, in the order PutMessageKeys puts them: UNIQ_KEY first
// if not empty, then each non-empty space-separated key of KEYS, each as
// "topic#key". Recovery computes them ahead of the index writer.
func MessageKeyHashes(dst []int32, topic, keys, uniq []byte) []int32 {
	prefix := javaHashBytes(javaHashBytes(0, topic), keySeparator)
	if len(uniq) > 0 {
		dst = append(dst, absHash(javaHashBytes(prefix, uniq)))
	}
	for len(keys) > 0 {
		i := bytes.IndexByte(keys, ' ')
		if i < 0 {
			i = len(keys)
		}
		if i > 0 {
			dst = append(dst, absHash(javaHashBytes(prefix, keys[:i])))
		}
		keys = keys[min(i+1, len(keys)):]
	}
	return dst
}

// PutMessageHashes indexes one message by the key hashes MessageKeyHashes
// computed, with PutMessage's rule: a message at or below the newest
// file's endPhyOffset was indexed already and is skipped.
func (s *Service) PutMessageHashes(hashes []int32, phyOffset, storeTimestamp int64) error {
	if phyOffset < 0 {
		return fmt.Errorf("%w: negative offset %d", ErrArgument, phyOffset)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if f := s.newest(); f != nil && f.hasEntries() && phyOffset <= f.hdr.EndPhyOffset {
		return nil
	}
	for _, h := range hashes {
		if err := s.putHash(h, phyOffset, storeTimestamp); err != nil {
			return err
		}
	}
	return nil
}

// keySeparator joins topic and key in an index key (BuildKey).
var keySeparator = []byte{'#'}

// roll creates the next file, named by ts (or the first free millisecond
// after the newest file's name), inheriting the newest file's end.
func (s *Service) roll(ts int64) (*file, error) {
	prev := s.newest()
	nameTS := clampNameTS(ts)
	if prev != nil && nameTS <= prev.nameTS {
		nameTS = prev.nameTS + 1
	}
	for ; nameTS < maxNameTS; nameTS++ {
		if _, err := s.fs.Stat(filepath.Join(s.cfg.Dir, FileName(nameTS))); err != nil {
			break
		}
	}
	f, err := s.openFile(FileName(nameTS), nameTS)
	if err != nil {
		return nil, err
	}
	f.hdr = Header{IndexCount: 1}
	if prev != nil {
		f.hdr.BeginTimestamp, f.hdr.EndTimestamp = prev.hdr.EndTimestamp, prev.hdr.EndTimestamp
		f.hdr.BeginPhyOffset, f.hdr.EndPhyOffset = prev.hdr.EndPhyOffset, prev.hdr.EndPhyOffset
	}
	f.writeHeader()
	f.checked.Store(true) // every entry it gets is this process's
	s.files = append(s.files, f)
	s.cfg.Logger.Debug("index file created", "name", f.name)
	return f, nil
}

// Query returns up to maxNum candidate phy offsets of messages of topic with
// key stored in [begin, end] (ms), newest file first, following each file's
// chain newest entry first. The candidates match by hash only: the caller
// filters on the real key.
func (s *Service) Query(topic, key string, maxNum int, begin, end int64) ([]int64, error) {
	if maxNum <= 0 {
		return nil, fmt.Errorf("%w: maxNum %d", ErrArgument, maxNum)
	}
	if err := s.checkFiles(begin, end); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return nil, ErrClosed
	}
	hash := KeyHash(BuildKey(topic, key))
	var out []int64
	for i := len(s.files) - 1; i >= 0; i-- {
		f := s.files[i]
		if f.hasEntries() && f.timeMatched(begin, end) {
			if err := f.verify(); err != nil { // only a file that came after checkFiles
				return out, err
			}
			out = f.lay.selectPhyOffsets(f.bytes(), f.hdr, hash, maxNum, begin, end, out)
		}
		if f.hdr.BeginTimestamp < begin || len(out) >= maxNum {
			break
		}
	}
	return out, nil
}

// checkFiles checks the files a query of [begin, end] may read that no
// query checked yet. An older file never changes, so it is checked without
// mu (puts, that is the store's appends, go on meanwhile); the newest one,
// which puts change, under mu's read side.
func (s *Service) checkFiles(begin, end int64) error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return ErrClosed
	}
	var todo []*file
	for _, f := range s.files {
		if f.hasEntries() && f.timeMatched(begin, end) && !f.checked.Load() {
			todo = append(todo, f)
		}
	}
	newest := s.newest()
	s.mu.RUnlock()
	for _, f := range todo {
		var err error
		if f == newest {
			s.mu.RLock()
			err = f.verify()
			s.mu.RUnlock()
		} else {
			s.mapped.RLock()
			if !f.unmapped {
				err = f.verify()
			}
			s.mapped.RUnlock()
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// EndPhyOffset is the newest file's endPhyOffset (0 without files): the
// commitlog offset of the last message indexed.
func (s *Service) EndPhyOffset() int64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if f := s.newest(); f != nil {
		return f.hdr.EndPhyOffset
	}
	return 0
}

// Files describes the files, oldest first.
func (s *Service) Files() []FileInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]FileInfo, len(s.files))
	for i, f := range s.files {
		out[i] = FileInfo{Name: f.name, Header: f.hdr}
	}
	return out
}

// TruncateAbove removes every entry with phyOffset >= phy, leaving the same
// bytes as if only the kept entries had been put: files that hold no kept
// entry are deleted, and the newest remaining file pops entries from its end.
func (s *Service) TruncateAbove(phy int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if err := s.firstHeaderErr(); err != nil {
		return err // not repaired by RecoverTo: the exit was clean, or the file is below the checkpoint's: damage
	}
	for f := s.newest(); f != nil; f = s.newest() {
		if f.hasEntries() && f.hdr.BeginPhyOffset < phy {
			popped, err := f.popFrom(phy)
			if err != nil {
				return err
			}
			if f.hasEntries() {
				if popped {
					return f.setEnd(s.cfg.StoreTime)
				}
				return nil
			}
		}
		if err := s.removeNewest(); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) removeNewest() error {
	f := s.files[len(s.files)-1]
	s.files = s.files[:len(s.files)-1]
	return s.remove(f)
}

func (s *Service) remove(f *file) error {
	s.mapped.Lock()
	f.unmapped = true
	cerr := f.mf.Close()
	s.mapped.Unlock()
	err := errors.Join(cerr, s.fs.Remove(f.path))
	if err != nil {
		return fmt.Errorf("index: delete %s: %w", f.path, err)
	}
	s.cfg.Logger.Debug("index file deleted", "name", f.name)
	return nil
}

// DeleteBelow deletes, oldest first, non-last files whose endPhyOffset is
// below minPhy (their messages are gone from the commitlog). It returns how
// many it deleted.
func (s *Service) DeleteBelow(minPhy int64) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, ErrClosed
	}
	n := 0
	for len(s.files) > 1 && s.files[0].hdr.EndPhyOffset < minPhy {
		f := s.files[0]
		s.files = s.files[1:]
		if err := s.remove(f); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// Flush makes every change made before it durable: entries first, then
// headers and slots. On real mappings the writer is held only while the
// dirty ranges are taken, not during the msyncs (on the heap twin, whose
// Flush copies the bytes, for the whole Flush). Files are removed only by
// the maintenance calls, which the caller never runs during a Flush. A
// failed Flush leaves its ranges marked for the next one.
func (s *Service) Flush() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	var work []flushRange
	copies := false
	for _, f := range s.files {
		work = f.takeDirty(work)
		copies = copies || f.mf.FlushReadsBytes()
	}
	if !copies {
		// msync: the writer goes on meanwhile. What it writes is marked
		// dirty for the next Flush; a checkpoint captured before this
		// Flush covers nothing of it.
		s.mu.Unlock()
	}
	var err error
	for i, r := range work {
		if err = r.flush(); err != nil {
			if !copies {
				s.mu.Lock()
			}
			for _, left := range work[i:] {
				left.redirty()
			}
			break
		}
	}
	if copies || err != nil {
		s.mu.Unlock()
	}
	return err
}

// Close closes (without flushing) every file.
func (s *Service) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return
	}
	s.closed = true
	s.mapped.Lock()
	defer s.mapped.Unlock()
	for _, f := range s.files {
		f.unmapped = true
		if err := f.mf.Close(); err != nil {
			s.cfg.Logger.Error("closing index file", "name", f.name, "error", err)
		}
	}
	s.files = nil
}
