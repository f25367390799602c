package snapstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.uber.org/goleak"

	"github.com/raftmq/raftmq/fsm"
	"github.com/raftmq/raftmq/internal/testseed"
	"github.com/raftmq/raftmq/mmap"
	"github.com/raftmq/raftmq/store"
	"github.com/raftmq/raftmq/vfs"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cleanBenchFixtures()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fixture is a fake commitlog on real files: nSeg segments of segSize random
// bytes, the last one cut at confirm.
type fixture struct {
	dir     string
	files   []store.SegmentFile
	header  fsm.SnapshotHeader
	segSize int64
}

func newFixture(t *testing.T, rng *rand.Rand, nSeg int, segSize int64, index uint64) *fixture {
	t.Helper()
	fx := &fixture{dir: filepath.Join(t.TempDir(), "commitlog"), segSize: segSize}
	if err := os.MkdirAll(fx.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range int64(nSeg) {
		b := make([]byte, segSize)
		for j := range b {
			b[j] = byte(rng.Uint32())
		}
		path := filepath.Join(fx.dir, mmap.FileName(i*segSize))
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
		fx.files = append(fx.files, store.SegmentFile{Path: path, Start: i * segSize, Size: segSize})
	}
	confirm := int64(nSeg-1)*segSize + 1 + rng.Int64N(segSize-1)
	fx.header = fsm.SnapshotHeader{
		Store: store.Snapshot{AppliedIndex: index, AppliedTerm: 2, ConfirmOffset: confirm, LastEntryOffset: confirm - 10,
			StoreTimestamp: 12345, Meta: []byte("topics and offsets")},
		Members:  map[string]string{"n1": "127.0.0.1:9001", "n2": "127.0.0.1:9002"},
		Segments: fsm.SegmentRefs(fx.files, confirm),
	}
	return fx
}

// want is the stream fsm.WriteSnapshot produces from the live files.
func (fx *fixture) want(t *testing.T) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := fsm.WriteSnapshot(&buf, fx.header, fx.files, fsm.FileSegments(vfs.OS())); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func openStore(t *testing.T, dir string, retain int) *Store {
	t.Helper()
	s, err := New(dir, retain, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func configuration() raft.Configuration {
	return raft.Configuration{Servers: []raft.Server{{Suffrage: raft.Voter, ID: "n1", Address: "127.0.0.1:7001"}}}
}

func linkSnapshot(t *testing.T, s *Store, fx *fixture) string {
	t.Helper()
	sink, err := s.Create(1, fx.header.Store.AppliedIndex, fx.header.Store.AppliedTerm, configuration(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.(fsm.SegmentLinker).LinkSegments(fx.header, fx.files); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	return sink.ID()
}

func readSnapshot(t *testing.T, s *Store, id string) (*raft.SnapshotMeta, []byte) {
	t.Helper()
	meta, rc, err := s.Open(id)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return meta, b
}

func TestLinkedStreamEqualsWriteSnapshot(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 1))
	fx := newFixture(t, rng, 3, 64<<10, 42)
	want := fx.want(t)
	s := openStore(t, t.TempDir(), 2)
	id := linkSnapshot(t, s, fx)

	meta, got := readSnapshot(t, s, id)
	if !bytes.Equal(got, want) {
		t.Fatalf("linked stream (%d bytes) differs from fsm.WriteSnapshot (%d bytes)", len(got), len(want))
	}
	if meta.Size != int64(len(want)) || meta.Index != 42 || meta.Term != 2 || meta.ID != id {
		t.Fatalf("meta %+v, stream %d bytes", meta, len(want))
	}
	h, _, err := readHeaderAndSegments(got)
	if err != nil || h.Store.ConfirmOffset != fx.header.Store.ConfirmOffset {
		t.Fatalf("stream does not read back: %v", err)
	}
	// The segments are links to the live files, not copies.
	for _, f := range fx.files {
		link := filepath.Join(s.Dir(), id, segmentsDir, mmap.FileName(f.Start))
		a, err1 := os.Stat(link)
		b, err2 := os.Stat(f.Path)
		if err1 != nil || err2 != nil || !os.SameFile(a, b) {
			t.Fatalf("segment %d: link %v / %v, same file %v", f.Start, err1, err2, err1 == nil && err2 == nil && os.SameFile(a, b))
		}
	}
	if st := s.Stats(); st.LinkedCreated != 1 || st.CopiedSegments != 0 || st.Opened != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// readHeaderAndSegments checks a stream the way fsm.Restore does.
func readHeaderAndSegments(stream []byte) (fsm.SnapshotHeader, int, error) {
	r := bytes.NewReader(stream)
	h, err := fsm.ReadSnapshotHeader(r)
	if err != nil {
		return h, 0, err
	}
	it := fsm.NewSegmentIterator(r, h)
	if err := it.Finish(); err != nil {
		return h, 0, err
	}
	return h, r.Len(), nil
}

// Appends past the confirm offset and retention unlinking the live segment
// change nothing in the snapshot.
func TestLinkedSnapshotSurvivesAppendAndRetention(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 2))
	fx := newFixture(t, rng, 3, 32<<10, 7)
	want := fx.want(t)
	s := openStore(t, t.TempDir(), 1)
	id := linkSnapshot(t, s, fx)

	last := fx.files[len(fx.files)-1]
	f, err := os.OpenFile(last.Path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	tail := fx.header.Store.ConfirmOffset - last.Start
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xAB}, int(fx.segSize-tail)), tail); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := os.Remove(fx.files[0].Path); err != nil {
		t.Fatal(err)
	}
	if _, got := readSnapshot(t, s, id); !bytes.Equal(got, want) {
		t.Fatal("snapshot stream changed after an append beyond confirm and a retention unlink")
	}
}

func TestStreamSnapshotRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 3))
	fx := newFixture(t, rng, 2, 16<<10, 9)
	stream := fx.want(t)
	s := openStore(t, t.TempDir(), 2)
	sink, err := s.Create(1, 9, 2, configuration(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	for rest := stream; len(rest) > 0; { // as raft's io.Copy from the network: uneven chunks
		n := min(len(rest), 1+rng.IntN(10000))
		if _, err := sink.Write(rest[:n]); err != nil {
			t.Fatal(err)
		}
		rest = rest[n:]
	}
	if err := sink.(fsm.SegmentLinker).LinkSegments(fx.header, fx.files); !errors.Is(err, ErrSinkState) {
		t.Fatalf("LinkSegments on a stream sink: %v, want ErrSinkState", err)
	}
	if err := sink.Close(); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(); err != nil { // raft closes again after Persist did
		t.Fatalf("second Close: %v", err)
	}
	if _, err := sink.Write([]byte{1}); !errors.Is(err, ErrSinkState) {
		t.Fatalf("Write after Close: %v", err)
	}
	meta, got := readSnapshot(t, s, sink.ID())
	if !bytes.Equal(got, stream) || meta.Size != int64(len(stream)) {
		t.Fatalf("stream snapshot: %d bytes read, meta size %d, want %d", len(got), meta.Size, len(stream))
	}
	if len(meta.Configuration.Servers) != 1 || meta.ConfigurationIndex != 1 {
		t.Fatalf("configuration not kept: %+v", meta)
	}
	h, err := s.ReadHeader(sink.ID())
	if err != nil || h.Store.AppliedIndex != 9 {
		t.Fatalf("ReadHeader: %+v, %v", h.Store, err)
	}
	if st := s.Stats(); st.StreamsReceived != 1 || st.LinkedCreated != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestListNewestFirstAndRetain(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 4))
	fx := newFixture(t, rng, 2, 8<<10, 1)
	clock := time.UnixMilli(1_000_000)
	s, err := New(t.TempDir(), 2, Options{Now: func() time.Time { return clock }})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, idx := range []uint64{10, 20, 20, 30} { // 20 twice: same term and index, later time
		fx.header.Store.AppliedIndex = idx
		ids = append(ids, linkSnapshot(t, s, fx))
		clock = clock.Add(time.Millisecond)
	}
	metas, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if len(metas) != 2 || metas[0].ID != ids[3] || metas[1].ID != ids[2] {
		t.Fatalf("List: %v, want [%s %s]", metaIDs(metas), ids[3], ids[2])
	}
	names, _ := os.ReadDir(s.Dir())
	if len(names) != 2 {
		t.Fatalf("%d entries on disk after retention, want 2", len(names))
	}
	for _, f := range fx.files { // deleting old snapshots removed links, not segments
		if _, err := os.Stat(f.Path); err != nil {
			t.Fatalf("live segment gone: %v", err)
		}
	}
	if _, _, err := s.Open(ids[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("open of a deleted snapshot: %v, want ErrNotFound", err)
	}
	if st := s.Stats(); st.Deleted != 2 {
		t.Fatalf("stats %+v", st)
	}
}

func metaIDs(ms []*raft.SnapshotMeta) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

// A crash while writing or deleting leaves a suffixed directory: List never
// shows it and New removes it; the finished snapshot is untouched.
func TestCrashLeftoversIgnoredAndCleaned(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 5))
	fx := newFixture(t, rng, 2, 8<<10, 5)
	dir := t.TempDir()
	s := openStore(t, dir, 3)
	id := linkSnapshot(t, s, fx)

	// An unfinished write (complete files, but never renamed) and a half-deleted one.
	fx.header.Store.AppliedIndex = 6
	sink, err := s.Create(1, 6, 2, configuration(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.(fsm.SegmentLinker).LinkSegments(fx.header, fx.files); err != nil {
		t.Fatal(err)
	}
	data, _ := encodeMeta(metaBody{Version: formatVersion, Kind: kindLinked, Meta: raft.SnapshotMeta{ID: sink.ID(), Index: 6}})
	if err := os.WriteFile(filepath.Join(dir, sink.ID()+tmpSuffix, metaFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(dir, "1-4-1"+delSuffix), os.DirFS(filepath.Join(dir, id))); err != nil {
		t.Fatal(err)
	}
	if metas, _ := s.List(); len(metas) != 1 || metas[0].ID != id {
		t.Fatalf("List with leftovers: %v", metaIDs(metas))
	}
	s2 := openStore(t, dir, 3) // "restart"
	names, _ := os.ReadDir(dir)
	if len(names) != 1 || names[0].Name() != id {
		t.Fatalf("after reopen: %v, want only %s", names, id)
	}
	if _, got := readSnapshot(t, s2, id); !bytes.Equal(got, fx.wantFor(t, 5)) {
		t.Fatal("finished snapshot changed")
	}
}

// wantFor is the expected stream with the header's index set to index.
func (fx *fixture) wantFor(t *testing.T, index uint64) []byte {
	fx.header.Store.AppliedIndex = index
	return fx.want(t)
}

func TestCorruptSnapshotsRejected(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 6))
	fx := newFixture(t, rng, 2, 8<<10, 1)
	dir := t.TempDir()
	s := openStore(t, dir, 10)
	var ids []string
	for i := range 5 {
		fx.header.Store.AppliedIndex = uint64(10 + i)
		ids = append(ids, linkSnapshot(t, s, fx))
	}
	flip := func(name string, off int) {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		b[off%len(b)] ^= 0x01
		if err := os.WriteFile(name, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// 0: meta bit flip, 1: meta missing, 2: header bit flip, 3: link missing.
	flip(filepath.Join(dir, ids[0], metaFile), 40)
	must(t, os.Remove(filepath.Join(dir, ids[1], metaFile)))
	flip(filepath.Join(dir, ids[2], headerFile), 30)
	must(t, os.Remove(filepath.Join(dir, ids[3], segmentsDir, mmap.FileName(0))))

	metas, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	if got := metaIDs(metas); len(got) != 3 || got[0] != ids[4] || got[1] != ids[3] || got[2] != ids[2] {
		t.Fatalf("List: %v (want %s %s %s)", got, ids[4], ids[3], ids[2])
	}
	for i, want := range []error{ErrCorrupt, ErrNotFound, ErrCorrupt, ErrCorrupt} {
		if _, _, err := s.Open(ids[i]); !errors.Is(err, want) {
			t.Errorf("open of damaged snapshot %d: %v, want %v", i, err, want)
		}
	}
	if _, got := readSnapshot(t, s, ids[4]); !bytes.Equal(got, fx.wantFor(t, 14)) {
		t.Fatal("intact snapshot unreadable")
	}
	for _, bad := range []string{"../x", "1-2", "a-b-c", ids[0] + tmpSuffix} {
		if _, _, err := s.Open(bad); !errors.Is(err, ErrNotFound) {
			t.Errorf("open %q: %v, want ErrNotFound", bad, err)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestCancelAndMisuse(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 7))
	fx := newFixture(t, rng, 1, 8<<10, 1)
	dir := t.TempDir()
	s := openStore(t, dir, 2)
	sink, err := s.Create(1, 1, 1, configuration(), 1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.(fsm.SegmentLinker).LinkSegments(fx.header, fx.files); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.Write([]byte("x")); !errors.Is(err, ErrSinkState) {
		t.Fatalf("Write on a linked sink: %v", err)
	}
	must(t, sink.Cancel())
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Fatalf("cancel left %v", names)
	}
	if metas, _ := s.List(); len(metas) != 0 {
		t.Fatalf("cancelled snapshot listed: %v", metaIDs(metas))
	}
	if _, err := s.Create(99, 1, 1, configuration(), 1, nil); !errors.Is(err, ErrVersion) {
		t.Fatalf("Create version 99: %v", err)
	}
}

// Readers race retention: every stream that opens must read back whole and
// correct; a snapshot being read is never deleted under it, and is deleted
// once its reader closes.
func TestRetentionVersusOpenReaders(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 8))
	fx := newFixture(t, rng, 3, 16<<10, 1)
	want := map[uint64][]byte{}
	for i := range uint64(40) {
		want[100+i] = fx.wantFor(t, 100+i)
	}
	s := openStore(t, t.TempDir(), 1)
	fx.header.Store.AppliedIndex = 100
	first := linkSnapshot(t, s, fx)
	_, held, err := s.Open(first)
	if err != nil {
		t.Fatal(err)
	}

	var wg sync.WaitGroup
	errs := make(chan error, 100)
	stop := make(chan struct{})
	var reads sync.Map
	for r := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := readNewest(s, want); err != nil {
					errs <- fmt.Errorf("reader %d: %w", r, err)
					return
				}
				reads.Store(r, i)
			}
		}()
	}
	for i := uint64(1); i < 40; i++ {
		fx.header.Store.AppliedIndex = 100 + i
		linkSnapshot(t, s, fx)
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// The held snapshot outlived 39 newer ones with retain 1 …
	got, err := io.ReadAll(held)
	if err != nil || !bytes.Equal(got, want[100]) {
		t.Fatalf("held reader: %d bytes, %v", len(got), err)
	}
	if _, err := os.Stat(filepath.Join(s.Dir(), first)); err != nil {
		t.Fatalf("held snapshot deleted while open: %v", err)
	}
	must(t, held.Close())
	// … and goes when it is closed.
	if _, err := os.Stat(filepath.Join(s.Dir(), first)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("held snapshot kept after close: %v", err)
	}
	if metas, _ := s.List(); len(metas) != 1 || metas[0].Index != 139 {
		t.Fatalf("List at the end: %v", metaIDs(metas))
	}
}

// readNewest opens the newest snapshot and checks it byte for byte; a
// snapshot deleted between List and Open is fine (ErrNotFound).
func readNewest(s *Store, want map[uint64][]byte) error {
	metas, err := s.List()
	if err != nil || len(metas) == 0 {
		return fmt.Errorf("list: %v (%d)", err, len(metas))
	}
	meta, rc, err := s.Open(metas[0].ID)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	if !bytes.Equal(b, want[meta.Index]) {
		return fmt.Errorf("snapshot %s: %d bytes differ from the expected %d", meta.ID, len(b), len(want[meta.Index]))
	}
	return nil
}

func TestIDs(t *testing.T) {
	for id, ok := range map[string]bool{"1-2-3": true, "10-20-1700000000000": true, "1-2": false,
		"1-2-3.tmp": false, "x-2-3": false, "1-2-3-4": false, "": false} {
		if validID(id) != ok {
			t.Errorf("validID(%q) = %v", id, !ok)
		}
	}
}

// noLinkFS refuses hard links the way Linux does across file systems.
type noLinkFS struct{ vfs.FS }

func (noLinkFS) Link(oldname, newname string) error {
	return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EXDEV}
}

// Where links are impossible the segments' confirmed prefixes are copied:
// slower, but the snapshot is the same stream.
func TestCopyWhenLinkImpossible(t *testing.T) {
	rng := rand.New(rand.NewPCG(uint64(testseed.Seed(t)), 9))
	fx := newFixture(t, rng, 3, 16<<10, 3)
	s, err := New(t.TempDir(), 2, Options{FS: noLinkFS{vfs.OS()}})
	if err != nil {
		t.Fatal(err)
	}
	id := linkSnapshot(t, s, fx)
	if _, got := readSnapshot(t, s, id); !bytes.Equal(got, fx.want(t)) {
		t.Fatal("copied snapshot differs from fsm.WriteSnapshot")
	}
	if st := s.Stats(); st.CopiedSegments != 3 || st.LinkedCreated != 1 {
		t.Fatalf("stats %+v", st)
	}
	last := fx.header.Segments[len(fx.header.Segments)-1]
	info, err := os.Stat(filepath.Join(s.Dir(), id, segmentsDir, mmap.FileName(last.Start)))
	if err != nil || info.Size() != last.Length {
		t.Fatalf("copy of the last segment: %v, want its %d confirmed bytes", err, last.Length)
	}
}
