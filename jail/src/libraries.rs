//! The shared libraries a kernel binary needs, to show them in its jail.
//!
//! `ldd` (glibc's, in every Debian) asks the dynamic loader, so the list
//! is the loader's own; it runs once per kernel binary and process. A
//! static kernel has none.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use super::JailError;

/// The loader and libraries of `kernel`, absolute host paths (the loader's
/// as the binary names it: `/lib64/ld-linux-x86-64.so.2`).
pub(super) fn of(kernel: &Path) -> Result<Vec<PathBuf>, JailError> {
    static KNOWN: Mutex<BTreeMap<PathBuf, Vec<PathBuf>>> = Mutex::new(BTreeMap::new());
    let mut known = KNOWN.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(libs) = known.get(kernel) {
        return Ok(libs.clone());
    }
    let fail = |why: String| JailError::Libraries { kernel: kernel.into(), why };
    let out = Command::new("ldd").arg(kernel).env_clear().output().map_err(|e| fail(format!("ldd: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let libs = if !out.status.success()
        && (stdout.contains("not a dynamic executable") || stderr.contains("not a dynamic executable"))
    {
        Vec::new()
    } else if out.status.success() {
        parse(&stdout).map_err(|e| fail(e.to_string()))?
    } else {
        return Err(fail(format!("ldd {}: {}", out.status, stderr.trim())));
    };
    known.insert(kernel.into(), libs.clone());
    Ok(libs)
}

/// A library the loader cannot find, by the name the binary needs.
#[derive(Debug, PartialEq, thiserror::Error)]
#[error("{0} not found")]
struct NotFound(String);

/// The absolute paths in `ldd`'s output: `name => /path (0x...)` and
/// `/path (0x...)` lines; the vDSO has neither. A library `not found` is
/// an error.
fn parse(ldd: &str) -> Result<Vec<PathBuf>, NotFound> {
    let mut libs = Vec::new();
    for line in ldd.lines().map(str::trim).filter(|l| !l.is_empty()) {
        let path = match line.split_once("=>") {
            Some((name, rest)) => {
                let rest = rest.trim();
                if rest.starts_with("not found") {
                    return Err(NotFound(name.trim().to_string()));
                }
                rest.split_whitespace().next().unwrap_or("")
            }
            None => line.split_whitespace().next().unwrap_or(""),
        };
        if path.starts_with('/') {
            libs.push(PathBuf::from(path));
        }
    }
    Ok(libs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ldd_lines_give_absolute_paths() {
        let out = "\tlinux-vdso.so.1 (0x00007ffd)\n\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f2e)\n\t/lib64/ld-linux-x86-64.so.2 (0x00007f2f)\n";
        assert_eq!(
            parse(out).unwrap(),
            vec![PathBuf::from("/lib/x86_64-linux-gnu/libc.so.6"), PathBuf::from("/lib64/ld-linux-x86-64.so.2")]
        );
        assert_eq!(parse("\tlibfoo.so.1 => not found\n").unwrap_err().to_string(), "libfoo.so.1 not found");
    }

    #[test]
    fn a_dynamic_binary_needs_its_loader() {
        let libs = of(Path::new("/bin/sh")).unwrap();
        assert!(libs.iter().any(|l| l.to_string_lossy().contains("ld-linux")), "{libs:?}");
    }
}
