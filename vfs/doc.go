// Package vfs is the file-system seam of raftmq: every file the store opens
// goes through an FS, so the same code runs on the real disk and in crash
// tests.
//
// Three implementations are provided:
//
//   - OS (also Default) is the host file system through package os. Sync is
//     fdatasync, Preallocate is fallocate (falling back to extending the file
//     with Truncate where fallocate is unsupported), SyncDir fsyncs the
//     directory, MkdirAll fsyncs the parent of each directory it creates
//     (and of the last one, even if it existed), and Fd returns the real descriptor so package mmap can map it.
//
//   - MemFS (NewMem) is an in-memory file system that remembers, per file, the
//     content as of the last Sync (the durable image) and the list of writes
//     and truncations made since. CrashClone builds the file system a power
//     loss would leave behind: only synced data (DropUnsynced), everything
//     (KeepUnsynced, what kill -9 leaves when the page cache survives), or a
//     torn mix of the two (TearUnsynced). CrashAt arms a crash at the k-th
//     mutating operation, so a test can crash a workload at every k = 0, 1,
//     2, … and check recovery on each clone. Directory entries follow POSIX:
//     Create, Remove, RemoveAll, Rename and Link change a directory durably
//     only once SyncDir of that directory follows (a crash clone outside
//     KeepUnsynced reverts them before that), while MkdirAll is durable when
//     it returns, like OS's. Fd returns NoFd, which makes package mmap use
//     its heap twin.
//
//   - WithInjector wraps any FS and asks an Injector before every operation
//     whether it should fail; injected errors wrap ErrInjected. OnIndex,
//     OnKind and Randomly are ready-made injectors.
//
// Space reports a file system's size and free bytes: statfs for OS, a
// capacity set with SetCapacity for MemFS (ErrNoSpaceInfo without one), so
// the store's disk-usage rules (retention by used share) run in tests too.
//
// All offsets are absolute (ReadAt/WriteAt); files have no position.
package vfs
