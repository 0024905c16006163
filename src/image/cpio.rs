//! A deterministic `newc` cpio writer for initramfs images.
//!
//! The archive depends only on the tree's names, contents, modes, owners and
//! link targets: entries are sorted by name, times are zero and inode
//! numbers count up, so the same inputs give the same bytes on any host.
//! Owners are the tree's (a configured image has system users: postgres
//! owns its directories), except that the builder's own ids, when it is not
//! root, become root's: the archive carries no host ids.

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

    fn archive(root: &Path) -> Vec<u8> {
        let mut w = CpioWriter::new(Vec::new());
        w.add_tree(root).unwrap();
        w.add_device(&DeviceNode { path: "/dev/console", mode: 0o600, major: 5, minor: 1 }).unwrap();
        w.finish().unwrap()
    }

    #[test]
    fn deterministic_and_readable_by_cpio() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("bin")).unwrap();
        std::fs::create_dir_all(d.path().join("dev")).unwrap();
        std::fs::write(d.path().join("bin/hello"), "#!/bin/sh\necho hi\n").unwrap();
        std::fs::set_permissions(d.path().join("bin/hello"), std::fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("hello", d.path().join("bin/hi")).unwrap();
        let a = archive(d.path());
        let b = archive(d.path());
        assert_eq!(a, b);
        assert_eq!(a.len() % 512, 0);
        // The system cpio lists what we wrote, with modes intact.
        if super::super::host::have_program("cpio") {
            let f = d.path().join("a.cpio");
            std::fs::write(&f, &a).unwrap();
            let out = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("cpio -itv < {}", f.display()))
                .output()
                .unwrap();
            let listing = String::from_utf8_lossy(&out.stdout);
            assert!(listing.contains("-rwxr-xr-x") && listing.contains("bin/hello"), "{listing}");
            assert!(listing.contains("bin/hi -> hello"), "{listing}");
            assert!(listing.contains("crw-------") && listing.contains("dev/console"), "{listing}");
        } else {
            testkit::skip(
                testkit::Cause::Missing,
                "the cpio(1) cross-check: cpio is not installed (Debian package cpio; scripts/test.sh installs it as root)",
            );
        }
    }
}
