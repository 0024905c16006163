//! `/sim/clock`, the guests' clock helper (`clock.c`): compiled with the
//! host's C compiler (`$CC`, else `cc`) once per source and compiler, kept in the cache, and put
//! into the images of clusters with `[faults.clock]` bump, strobe or
//! drift_ppm (a clock offset needs nothing in the guest).

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};

use super::cache::{build_entry, cache_root, KeyHasher};

/// The helper's source, compiled into simcluster.
pub const SOURCE: &str = include_str!("clock.c");

/// A static binary without libc (raw system calls): it runs in any image.
const FLAGS: &[&str] = &[
    "-Os",
    "-static",
    "-nostdlib",
    "-ffreestanding",
    "-fno-builtin",
    "-fno-stack-protector",
    "-fno-pie",
    "-no-pie",
    "-fno-asynchronous-unwind-tables",
    "-Wall",
    "-Werror",
    "-Wl,--build-id=none",
];

/// The built helper and its cache key (part of the root filesystem's).
#[derive(Debug, Clone)]
pub struct ClockHelper {
    /// The helper binary in the cache.
    pub path: PathBuf,
    /// Its cache key: the source, the flags and the compiler's version.
    pub key: String,
}

/// The C compiler: `$CC` (a program, no arguments), else `cc`.
fn compiler() -> std::ffi::OsString {
    std::env::var_os("CC").filter(|c| !c.is_empty()).unwrap_or_else(|| "cc".into())
}

/// Builds the helper (or finds it built): the key is the source, the flags
/// and the compiler's `--version`. `cluster_file` names the cluster that
/// needs it in the error when the host has no C compiler.
pub fn ensure(cluster_file: &Path, quiet: bool) -> Result<ClockHelper> {
    let cc = compiler();
    let version = match Command::new(&cc).arg("--version").output() {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        _ => bail!(
            "{}: [faults.clock] needs a C compiler on this host to build the guests' clock helper /sim/clock \
             ({} was not found or failed; install gcc: apt-get install gcc)",
            cluster_file.display(),
            cc.to_string_lossy()
        ),
    };
    let mut key = KeyHasher::new("clock-helper-1");
    key.add_str(SOURCE).add_str(&FLAGS.join(" ")).add_str(&cc.to_string_lossy()).add_str(&version);
    let key = key.finish();
    let dir = cache_root().join("tools").join(format!("clock-{key}"));
    let path = dir.join("clock");
    build_entry(&dir, "the clock helper", quiet, || path.is_file(), |work| compile(&cc, work))?;
    Ok(ClockHelper { path, key })
}

/// Compiles the helper into `work` (the cache entry's temporary
/// directory), which then holds only `clock`; returns `work`.
fn compile(cc: &std::ffi::OsStr, work: &Path) -> Result<PathBuf> {
    let src = work.join("clock.c");
    std::fs::write(&src, SOURCE)?;
    let out =
        Command::new(cc).args(FLAGS).arg("-o").arg(work.join("clock")).arg(&src).output().context("cannot run cc")?;
    if !out.status.success() {
        bail!("cc could not build the clock helper /sim/clock: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    std::fs::remove_file(&src)?;
    Ok(work.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// On a host (no /sim/agent) the helper reads the clocks but refuses to
    /// change them: run there by mistake, as root, it would move the host's.
    #[test]
    fn outside_a_guest_it_reads_but_never_sets_the_clock() {
        if Path::new("/sim/agent").exists() {
            testkit::skip(
                testkit::Cause::Host,
                "this machine has /sim/agent: it is itself a simcluster guest, where the helper may set the clock",
            );
            return;
        }
        let helper = match ensure(Path::new("cluster.toml"), true) {
            Ok(h) => h,
            Err(e) => {
                testkit::skip(testkit::Cause::Missing, format!("cannot build the clock helper here: {e:#}"));
                return;
            }
        };
        let now = Command::new(&helper.path).arg("now").output().unwrap();
        assert!(now.status.success(), "{now:?}");
        let words: Vec<i64> =
            String::from_utf8_lossy(&now.stdout).split_whitespace().map(|w| w.parse().unwrap()).collect();
        assert_eq!(words.len(), 2, "{now:?}");
        for args in [&["bump", "1"][..], &["drift", "10"], &["strobe", "1", "1", "1"]] {
            let o = Command::new(&helper.path).args(args).output().unwrap();
            assert_eq!(o.status.code(), Some(2), "{args:?}: {o:?}");
            let said = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
            assert!(said.contains("not inside a simcluster guest"), "{args:?}: {said}");
        }
    }
}
