// Package lossyfs is a FUSE file system that loses what a disk loses when
// the power goes: it passes everything through to a backing directory but
// keeps in a volatile layer every change not yet made durable.
//
// # Contract
//
// The backing directory is the durable state. Through the mount:
//
//   - A write (write(2), pwrite, or a page of a shared mmap written back by
//     the kernel) is volatile until an fsync, fdatasync or msync(MS_SYNC) of
//     that file (any descriptor of it). Size changes (truncate, extending
//     writes, fallocate) and zeroing (fallocate PUNCH_HOLE / ZERO_RANGE) are
//     volatile in the same way. syncfs(2) and sync(2) do not count: the
//     kernel sends no FUSE request for them (only virtiofs gets FUSE_SYNCFS).
//   - A directory change (create, mkdir, link, unlink, rmdir, rename) is
//     volatile until an fsync of the directory holding the entry. A rename
//     between directories is durable in the target when the target is
//     fsynced; for a file the source name is then still durable (a durable
//     hard link) until the source directory is fsynced; a directory, having
//     one name, leaves its old place at that moment. A new directory is
//     reachable after a power loss only once its parent was fsynced after
//     the mkdir (fsyncing the directory itself is not enough), unless
//     Options.LenientDirs, which makes that fsync also make its name and its
//     ancestors' names durable (as ext4's journal commit does in practice).
//   - A file's durable content follows the file, not its names: data fsynced
//     before its name is durable is there once a directory fsync makes the
//     name durable.
//   - Metadata other than size (mode, owner, times) is kept in memory and
//     not modelled: after a remount it is what the backing files say.
//
// PowerLoss models the power going: the kernel's dirty pages are first
// pushed into the volatile layer (so they are counted and may be persisted
// torn), the FUSE connection is aborted through /sys/fs/fuse/connections
// (the kernel's caches of the mount die), the volatile layer is dropped (or
// with Torn, a seeded random subset of its unsynced pages is persisted,
// torn at 512-byte sectors) and the mount is detached. The Report says how
// many bytes, pages, sizes and directory entries were dropped. Mount the
// backing directory again (MountAgain) to see what survived. Unmount is a
// clean shutdown: everything becomes durable.
//
// Kernel caching: files are opened without FOPEN_KEEP_CACHE and without
// direct I/O (so shared mmap works: msync sends WRITE then FSYNC); entry and
// attribute timeouts are Options. Every change goes through the mount, so
// the caches are coherent within one mount, and a power loss ends the mount
// with its caches.
//
// Layout of the backing directory: the file tree as durable, plus MetaDir
// (".lossyfs", hidden from the mount): inodes/<id> is the home of each file
// (its durable content; its names are hard links to it) and dirs/<id> holds
// directories that lost their durable name while still live. At mount,
// homes no name reaches and dirs/ are removed.
//
// Only regular files and directories are supported (no symlinks, devices,
// xattrs). The backing directory is never fsynced: the host does not lose
// power, lossyfs models that it does.
//
// The command cmd/lossyfs mounts one file system and takes power-loss
// commands on a control socket (see Serve and Control), for harnesses that
// run the processes using the mount as separate processes.
package lossyfs
