//! A static busybox, and a bare initramfs around it, for tests that boot a
//! guest without the image builder (vmm sits below it): vmm's `uml_disk`
//! and `vhost_user_uml`.
//!
//! [`static_busybox`] finds one without hand-made fixtures, in this order:
//! `$SIMCLUSTER_BUSYBOX`; the host's /bin/busybox or /usr/bin/busybox where
//! it is statically linked (Debian's busybox-static installs one there);
//! one unpacked earlier under the cache (`testkit/` or the nested KVM
//! script's `nested/`); else Debian's `busybox-static` package, fetched with
//! `apt-get download` and unpacked with `dpkg-deb -x` (never installed)
//! into `<cache>/testkit/busybox-static-<version>/`, as
//! scripts/test-kvm-nested.sh does (after `apt-get update` where apt knows
//! no version yet: a fresh machine). The cache is `$SIMCLUSTER_CACHE`, else
//! `$XDG_CACHE_HOME/simcluster`, else `~/.cache/simcluster` (the image
//! builder's: [`simcache::cache_root`]).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

/// The environment variable that names a static busybox to use.
pub const BUSYBOX_ENV: &str = "SIMCLUSTER_BUSYBOX";

/// The Debian package [`static_busybox`] downloads.
pub const PACKAGE: &str = "busybox-static";

/// What a vmm test needs to boot a bare UML guest: the kernel
/// (`SIMCLUSTER_UML_KERNEL`, which scripts/test.sh exports) and a static
/// busybox. `None`, with the running test's skip recorded
/// ([`crate::Cause::Missing`]: the scripts provide both), when either is missing.
pub fn uml_guest() -> Option<(PathBuf, PathBuf)> {
    let kernel = match std::env::var_os("SIMCLUSTER_UML_KERNEL").map(PathBuf::from) {
        Some(k) if k.is_file() => k,
        Some(k) => {
            crate::skip(crate::Cause::Missing, format!("SIMCLUSTER_UML_KERNEL={} is not a file", k.display()));
            return None;
        }
        None => {
            crate::skip(
                crate::Cause::Missing,
                "no UML kernel: set SIMCLUSTER_UML_KERNEL to a linux built for ARCH=um with time-travel \
                 (scripts/test.sh exports the image builder's: simcluster image build guest-images/hello-cluster)",
            );
            return None;
        }
    };
    match static_busybox() {
        Ok(busybox) => Some((kernel, busybox)),
        Err(why) => {
            crate::skip(crate::Cause::Missing, why);
            None
        }
    }
}

/// A statically linked busybox for an x86-64 guest, found or fetched once
/// per test binary (see the module docs); `Err` is the reason there is
/// none, fit for a [`crate::Cause::Missing`] skip.
pub fn static_busybox() -> Result<PathBuf, String> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    FOUND.get_or_init(find).clone()
}

fn find() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os(BUSYBOX_ENV) {
        let p = PathBuf::from(p);
        return if is_static_elf(&p) {
            Ok(p)
        } else {
            Err(format!("{BUSYBOX_ENV}={} is not a statically linked x86-64 executable", p.display()))
        };
    }
    if let Some(p) = ["/bin/busybox", "/usr/bin/busybox"].map(PathBuf::from).into_iter().find(|p| is_static_elf(p)) {
        return Ok(p);
    }
    let cache = simcache::cache_root();
    if let Some(p) = unpacked(&cache.join("testkit")).or_else(|| unpacked(&cache.join("nested"))) {
        return Ok(p);
    }
    fetch(&cache.join("testkit"))
}

/// The busybox of a complete `busybox-static-<version>/` under `dir` (the
/// newest name, where there are several).
fn unpacked(dir: &Path) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(&format!("{PACKAGE}-")))
        .map(|e| e.path())
        .filter(|d| d.join(".done").is_file())
        .map(|d| d.join("root/bin/busybox"))
        .filter(|p| is_static_elf(p))
        .collect();
    found.sort();
    found.pop()
}

/// Downloads and unpacks the candidate version of busybox-static into
/// `dir/busybox-static-<version>/` (a temporary sibling renamed into
/// place, so concurrent test binaries never see half of it).
fn fetch(dir: &Path) -> Result<PathBuf, String> {
    let how = format!("set {BUSYBOX_ENV} to a static busybox, or let apt-get download {PACKAGE} (apt-get update)");
    let candidate = || -> Result<Option<String>, String> {
        let policy = Command::new("apt-cache")
            .args(["policy", PACKAGE])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("no static busybox here and apt-cache cannot run ({e}): {how}"))?;
        Ok(String::from_utf8_lossy(&policy.stdout)
            .lines()
            .find_map(|l| l.trim().strip_prefix("Candidate:").map(|v| v.trim().to_string()))
            .filter(|v| !v.is_empty() && v != "(none)"))
    };
    let version = match candidate()? {
        Some(v) => v,
        None => {
            // A fresh machine may have no package lists yet (only root can fetch them).
            let _ = Command::new("apt-get")
                .args(["update", "-q"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
            candidate()?.ok_or_else(|| format!("no static busybox here and apt knows no {PACKAGE} candidate: {how}"))?
        }
    };
    let target = dir.join(format!("{PACKAGE}-{version}"));
    let busybox = target.join("root/bin/busybox");
    if target.join(".done").is_file() && is_static_elf(&busybox) {
        return Ok(busybox);
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    // static_busybox fetches once per process: the pid makes the name unique.
    let work = dir.join(format!(".{PACKAGE}-{version}.{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let result = (|| {
        let dl = work.join("dl");
        std::fs::create_dir_all(&dl).map_err(|e| format!("{}: {e}", dl.display()))?;
        // As root, apt-get download drops to the _apt user where it can: let it write.
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(&dl, std::fs::Permissions::from_mode(0o777));
        let got = Command::new("apt-get")
            .args(["download", "-q"])
            .arg(format!("{PACKAGE}={version}"))
            .current_dir(&dl)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("apt-get cannot run ({e}): {how}"))?;
        if !got.status.success() {
            return Err(format!(
                "apt-get download {PACKAGE}={version} failed ({}): {how}",
                String::from_utf8_lossy(&got.stderr).trim()
            ));
        }
        let deb = std::fs::read_dir(&dl)
            .map_err(|e| format!("{}: {e}", dl.display()))?
            .filter_map(|e| e.ok())
            .map(|e| e.path())
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .ok_or_else(|| format!("apt-get download {PACKAGE}={version} left no .deb"))?;
        let stage = work.join("unpacked");
        std::fs::create_dir_all(&stage).map_err(|e| format!("{}: {e}", stage.display()))?;
        let x = Command::new("dpkg-deb")
            .arg("-x")
            .arg(&deb)
            .arg(stage.join("root"))
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("dpkg-deb cannot run ({e}): {how}"))?;
        if !x.status.success() {
            return Err(format!("dpkg-deb -x {} failed: {}", deb.display(), String::from_utf8_lossy(&x.stderr).trim()));
        }
        if !is_static_elf(&stage.join("root/bin/busybox")) {
            return Err(format!("{PACKAGE}={version} holds no static bin/busybox"));
        }
        std::fs::write(stage.join(".done"), "").map_err(|e| format!("{}: {e}", stage.display()))?;
        // Another test binary may have put it in place meanwhile: theirs is as good.
        if std::fs::rename(&stage, &target).is_err() && !target.join(".done").is_file() {
            return Err(format!("cannot move {} to {}", stage.display(), target.display()));
        }
        Ok(busybox.clone())
    })();
    let _ = std::fs::remove_dir_all(&work);
    result
}

/// Whether `path` is an x86-64 ELF executable without a program
/// interpreter (no `PT_INTERP` program header: statically linked), so it
/// runs in a bare initramfs.
pub fn is_static_elf(path: &Path) -> bool {
    let Ok(b) = std::fs::read(path) else {
        return false;
    };
    // ELFCLASS64, little-endian, EM_X86_64.
    if b.len() < 64 || &b[..4] != b"\x7fELF" || b[4] != 2 || b[5] != 1 || b[0x12..0x14] != [0x3e, 0] {
        return false;
    }
    let u16_at = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]) as usize;
    let Ok(phoff) = usize::try_from(u64::from_le_bytes(b[0x20..0x28].try_into().unwrap())) else {
        return false;
    };
    let (phentsize, phnum) = (u16_at(0x36), u16_at(0x38));
    phnum > 0
        && (0..phnum).all(|i| {
            let at = phoff.saturating_add(i * phentsize);
            // PT_INTERP = 3
            b.get(at..at.saturating_add(4)).is_some_and(|t| u32::from_le_bytes(t.try_into().unwrap()) != 3)
        })
}

/// A newc cpio archive for an initramfs, written by simcpio (the writer
/// simcluster's images use): `/bin/busybox` (installing its applets is
/// /init's job: `/bin/busybox --install -s /bin`), `/init` from `init`,
/// `/dev/console`, and empty `dev mnt proc sys tmp`. Deterministic: owners
/// root, times zero, inodes counting up, entries in a fixed order.
pub fn initramfs(busybox: &Path, init: &str) -> std::io::Result<Vec<u8>> {
    let mut w = simcpio::CpioWriter::new(Vec::new());
    for d in ["bin", "dev", "mnt", "proc", "sys", "tmp"] {
        w.add_directory(d, 0o755)?;
    }
    w.add_file("bin/busybox", 0o755, &std::fs::read(busybox)?)?;
    w.add_device(&simcpio::DeviceNode { path: "/dev/console", mode: 0o600, major: 5, minor: 1 })?;
    w.add_file("init", 0o755, init.as_bytes())?;
    w.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_executable_is_not_static() {
        // The test binary itself links libc dynamically (it has PT_INTERP).
        let me = std::env::current_exe().unwrap();
        assert!(!is_static_elf(&me), "{}", me.display());
        assert!(!is_static_elf(Path::new("/nonexistent")));
        let dir = std::env::temp_dir().join(format!("testkit-elf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("script");
        std::fs::write(&f, "#!/bin/sh\n").unwrap();
        assert!(!is_static_elf(&f));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_initramfs_is_newc_and_deterministic() {
        let dir = std::env::temp_dir().join(format!("testkit-cpio-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bb = dir.join("busybox");
        std::fs::write(&bb, b"not really busybox").unwrap();
        let a = initramfs(&bb, "#!/bin/busybox sh\n").unwrap();
        let b = initramfs(&bb, "#!/bin/busybox sh\n").unwrap();
        assert_eq!(a, b);
        assert_eq!(&a[..6], b"070701");
        assert_eq!(a.len() % 4, 0);
        let text = String::from_utf8_lossy(&a);
        for name in ["bin/busybox\0", "dev/console\0", "init\0", "TRAILER!!!\0", "not really busybox"] {
            assert!(text.contains(name), "{name:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
