//! A deterministic `newc` cpio writer for initramfs images.
//!
//! The archive depends only on the tree's names, contents, modes, owners and
//! link targets: entries are sorted by name, times are zero and inode
//! numbers count up, so the same inputs give the same bytes on any host.
//! Owners are the tree's (a configured image has system users: postgres
//! owns its directories), except that the builder's own ids, when it is not
//! root, become root's: the archive carries no host ids.
//!
//! A tree on disk goes in with [`CpioWriter::add_tree`] (simcluster's
//! initramfs images); entries that exist only in the archive with
//! [`CpioWriter::add_directory`], [`CpioWriter::add_file`] and
//! [`CpioWriter::add_device`] (a device node; the tests' small initramfs
//! around a busybox). [`CpioWriter::finish`] writes the trailer and pads the
//! archive to a multiple of 512 bytes, as cpio(1) does.
#![deny(missing_docs)]

use std::io::{self, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

/// A device node that exists only in the archive (e.g. /dev/console, which
/// the kernel opens for init before any devtmpfs is mounted).
pub struct DeviceNode {
    /// Absolute path in the archive (`/dev/console`).
    pub path: &'static str,
    /// Permission bits (`0o600`); the writer adds the character-device type.
    pub mode: u32,
    /// Device major number.
    pub major: u32,
    /// Device minor number.
    pub minor: u32,
}

/// Writes a `newc` cpio archive to `out`, entry by entry, then the trailer
/// ([`CpioWriter::finish`]).
pub struct CpioWriter<W: Write> {
    out: W,
    written: u64,
    next_ino: u32,
    /// The builder's (uid, gid), written as (0, 0).
    builder: (u32, u32),
}

/// Owner ids in the archive for a file owned by `id` on the host.
fn archive_id(id: u32, builder: u32) -> u32 {
    if id == builder {
        0
    } else {
        id
    }
}

impl<W: Write> CpioWriter<W> {
    /// A writer to `out`; the caller's uid and gid are the builder's ids,
    /// written as root's.
    pub fn new(out: W) -> Self {
        // SAFETY: getuid and getgid have no preconditions.
        let builder = unsafe { (libc::getuid(), libc::getgid()) };
        CpioWriter { out, written: 0, next_ino: 1, builder }
    }

    fn pad(&mut self) -> io::Result<()> {
        let n = (4 - (self.written % 4) as usize) % 4;
        self.out.write_all(&[0u8; 3][..n])?;
        self.written += n as u64;
        Ok(())
    }

    fn entry(&mut self, name: &str, mode: u32, nlink: u32, rdev: (u32, u32), data: &[u8]) -> io::Result<()> {
        self.owned_entry(name, mode, (0, 0), nlink, rdev, data)
    }

    fn owned_entry(
        &mut self,
        name: &str,
        mode: u32,
        owner: (u32, u32),
        nlink: u32,
        rdev: (u32, u32),
        data: &[u8],
    ) -> io::Result<()> {
        let ino = self.next_ino;
        self.next_ino += 1;
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            ino,
            mode,
            owner.0,
            owner.1,
            nlink,
            0,
            data.len(),
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() + 1,
            0
        );
        self.out.write_all(header.as_bytes())?;
        self.out.write_all(name.as_bytes())?;
        self.out.write_all(&[0])?;
        self.written += (header.len() + name.len() + 1) as u64;
        self.pad()?;
        self.out.write_all(data)?;
        self.written += data.len() as u64;
        self.pad()
    }

    /// Adds `root` and everything below it, as archive names relative to it.
    pub fn add_tree(&mut self, root: &Path) -> io::Result<()> {
        self.entry(".", S_IFDIR | 0o755, 2, (0, 0), &[])?;
        self.add_dir(root, "")
    }

    fn add_dir(&mut self, dir: &Path, prefix: &str) -> io::Result<()> {
        let mut names: Vec<_> = std::fs::read_dir(dir)?.map(|e| e.map(|e| e.file_name())).collect::<io::Result<_>>()?;
        names.sort();
        for name in names {
            let path = dir.join(&name);
            let arch = format!("{prefix}{}", name.to_string_lossy());
            let md = std::fs::symlink_metadata(&path)?;
            let perm = md.permissions().mode() & 0o7777;
            let ft = md.file_type();
            let owner = (archive_id(md.uid(), self.builder.0), archive_id(md.gid(), self.builder.1));
            if ft.is_dir() {
                self.owned_entry(&arch, S_IFDIR | perm, owner, 2, (0, 0), &[])?;
                self.add_dir(&path, &format!("{arch}/"))?;
            } else if ft.is_symlink() {
                let target = std::fs::read_link(&path)?;
                self.owned_entry(&arch, S_IFLNK | 0o777, owner, 1, (0, 0), target.as_os_str().as_encoded_bytes())?;
            } else if ft.is_file() {
                let data = std::fs::read(&path)?;
                debug_assert_eq!(data.len() as u64, md.size());
                self.owned_entry(&arch, S_IFREG | perm, owner, 1, (0, 0), &data)?;
            }
            // Sockets, fifos and device files in a staging tree are skipped:
            // dpkg-deb -x never creates them, and the guest mounts devtmpfs
            // over the /dev that mmdebstrap populates.
        }
        Ok(())
    }

    /// Adds a directory that exists only in the archive, owned by root,
    /// with permission bits `mode` (`0o755`).
    pub fn add_directory(&mut self, path: &str, mode: u32) -> io::Result<()> {
        self.entry(path.trim_start_matches('/'), S_IFDIR | (mode & 0o7777), 2, (0, 0), &[])
    }

    /// Adds a regular file that exists only in the archive, owned by root,
    /// with permission bits `mode` (`0o755`) and contents `data`.
    pub fn add_file(&mut self, path: &str, mode: u32, data: &[u8]) -> io::Result<()> {
        self.entry(path.trim_start_matches('/'), S_IFREG | (mode & 0o7777), 1, (0, 0), data)
    }

    /// Adds a character device node that exists only in the archive.
    pub fn add_device(&mut self, dev: &DeviceNode) -> io::Result<()> {
        self.entry(dev.path.trim_start_matches('/'), S_IFCHR | dev.mode, 1, (dev.major, dev.minor), &[])
    }

    /// Writes the trailer, pads the archive to a multiple of 512 bytes (as
    /// cpio(1) does), flushes and gives `out` back.
    pub fn finish(mut self) -> io::Result<W> {
        self.entry("TRAILER!!!", 0, 1, (0, 0), &[])?;
        // Pad the archive to a 512-byte multiple, as cpio(1) does.
        let n = (512 - (self.written % 512) as usize) % 512;
        self.out.write_all(&vec![0u8; n])?;
        self.out.flush()?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One entry of a newc archive as read back: its 13 header fields
    /// (ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor
    /// rdevminor namesize check), its name and its data.
    #[derive(Debug, PartialEq)]
    struct Entry {
        fields: [u32; 13],
        name: String,
        data: Vec<u8>,
    }

    /// Parses a newc archive strictly: every header's magic, the name's NUL,
    /// zero padding to 4 bytes after the name and after the data, a trailer
    /// last, and only zeros after it. Returns the entries, the trailer's
    /// included, and the archive's length up to the trailer's end.
    fn parse(a: &[u8]) -> (Vec<Entry>, usize) {
        let mut at = 0;
        let mut entries = Vec::new();
        let pad = |at: usize| at.next_multiple_of(4);
        loop {
            let h = &a[at..at + 110];
            assert_eq!(&h[..6], b"070701", "magic at {at}");
            let mut fields = [0u32; 13];
            for (i, f) in fields.iter_mut().enumerate() {
                let hex = std::str::from_utf8(&h[6 + 8 * i..14 + 8 * i]).unwrap();
                *f = u32::from_str_radix(hex, 16).unwrap();
            }
            let name_end = at + 110 + fields[11] as usize;
            assert_eq!(a[name_end - 1], 0, "the name's NUL at {at}");
            let name = String::from_utf8(a[at + 110..name_end - 1].to_vec()).unwrap();
            assert!(a[name_end..pad(name_end)].iter().all(|&b| b == 0), "padding after {name}");
            let data_at = pad(name_end);
            let data_end = data_at + fields[6] as usize;
            let data = a[data_at..data_end].to_vec();
            assert!(a[data_end..pad(data_end)].iter().all(|&b| b == 0), "padding after {name}'s data");
            at = pad(data_end);
            let trailer = name == "TRAILER!!!";
            entries.push(Entry { fields, name, data });
            if trailer {
                assert!(a[at..].iter().all(|&b| b == 0), "only zeros after the trailer");
                return (entries, at);
            }
        }
    }

    /// A small archive of every kind of entry: a tree on disk (a directory,
    /// an executable, a symlink), then a device, a directory and a file that
    /// exist only in the archive.
    fn small(root: &Path) -> Vec<u8> {
        std::fs::create_dir_all(root.join("bin")).unwrap();
        std::fs::write(root.join("bin/hello"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::set_permissions(root.join("bin/hello"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(root.join("bin"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let _ = std::fs::remove_file(root.join("bin/hi"));
        std::os::unix::fs::symlink("hello", root.join("bin/hi")).unwrap();
        let mut w = CpioWriter::new(Vec::new());
        w.add_tree(root).unwrap();
        w.add_device(&DeviceNode { path: "/dev/console", mode: 0o600, major: 5, minor: 1 }).unwrap();
        w.add_directory("/etc", 0o755).unwrap();
        w.add_file("etc/motd", 0o640, b"hello\n").unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn a_small_archive_reads_back_entry_by_entry() {
        let d = tempfile::tempdir().unwrap();
        let a = small(d.path());
        assert_eq!(a, small(d.path()), "the same tree gives the same bytes");
        assert_eq!(a.len() % 512, 0, "padded to 512 bytes");
        let (entries, end) = parse(&a);
        assert!(a.len() - end < 512, "no more padding than 512 bytes needs");
        let got: Vec<_> =
            entries.iter().map(|e| (e.name.as_str(), e.fields[1], e.fields[4], e.data.as_slice())).collect();
        assert_eq!(
            got,
            [
                (".", S_IFDIR | 0o755, 2, &b""[..]),
                ("bin", S_IFDIR | 0o755, 2, b""),
                ("bin/hello", S_IFREG | 0o755, 1, b"#!/bin/sh\necho hi\n"),
                ("bin/hi", S_IFLNK | 0o777, 1, b"hello"),
                ("dev/console", S_IFCHR | 0o600, 1, b""),
                ("etc", S_IFDIR | 0o755, 2, b""),
                ("etc/motd", S_IFREG | 0o640, 1, b"hello\n"),
                ("TRAILER!!!", 0, 1, b""),
            ]
        );
        for (i, e) in entries.iter().enumerate() {
            assert_eq!(e.fields[0], i as u32 + 1, "inodes count up from 1: {}", e.name);
            assert_eq!(e.fields[5], 0, "time zero: {}", e.name);
            assert_eq!(e.fields[6] as usize, e.data.len());
            assert_eq!(e.fields[11] as usize, e.name.len() + 1, "namesize counts the NUL");
            assert_eq!((e.fields[7], e.fields[8], e.fields[12]), (0, 0, 0), "no device of its own, no checksum");
            let rdev = if e.name == "dev/console" { (5, 1) } else { (0, 0) };
            assert_eq!((e.fields[9], e.fields[10]), rdev, "{}", e.name);
            // The tree is the builder's, whose ids become root's.
            assert_eq!((e.fields[2], e.fields[3]), (0, 0), "owned by root: {}", e.name);
        }
    }

    #[test]
    fn an_empty_archive_is_a_trailer_in_512_bytes() {
        let a = CpioWriter::new(Vec::new()).finish().unwrap();
        assert_eq!(a.len(), 512);
        let (entries, end) = parse(&a);
        // 110 header bytes, "TRAILER!!!\0" (11), padded to 124.
        assert_eq!(end, 124);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].name, "TRAILER!!!");
        assert_eq!(&a[..14], b"07070100000001");
    }

    #[test]
    fn cpio_lists_what_was_written() {
        let d = tempfile::tempdir().unwrap();
        let a = small(d.path());
        let have_cpio =
            std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("cpio").is_file()));
        if !have_cpio {
            testkit::skip(
                testkit::Cause::Missing,
                "the cpio(1) cross-check: cpio is not installed (Debian package cpio; scripts/test.sh installs it as root)",
            );
            return;
        }
        let f = d.path().join("a.cpio");
        std::fs::write(&f, &a).unwrap();
        let list = |flags: &str| {
            let out =
                std::process::Command::new("cpio").arg(flags).stdin(std::fs::File::open(&f).unwrap()).output().unwrap();
            assert!(out.status.success(), "cpio {flags}: {}", String::from_utf8_lossy(&out.stderr));
            String::from_utf8(out.stdout).unwrap()
        };
        // Every name, in the archive's order.
        assert_eq!(list("-it"), ".\nbin\nbin/hello\nbin/hi\ndev/console\netc\netc/motd\n");
        // And with modes intact.
        let listing = list("-itv");
        for (mode, name) in [
            ("-rwxr-xr-x", "bin/hello"),
            ("lrwxrwxrwx", "bin/hi -> hello"),
            ("crw-------", "dev/console"),
            ("drwxr-xr-x", " etc\n"),
            ("-rw-r-----", "etc/motd"),
        ] {
            assert!(
                listing.lines().any(|l| l.starts_with(mode) && (l.to_owned() + "\n").contains(name)),
                "{mode} {name}: {listing}"
            );
        }
    }
}
