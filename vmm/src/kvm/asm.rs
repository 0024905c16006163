//! Builds the small test guests (vmm/guests/*.S) into flat binaries with GNU as and ld.
//!
//! The guests are x86-64 assembly, linked at [`super::arch::layout::LOAD_ADDR`] with
//! entry `_start` first in `.text`; the output is a raw image for
//! [`super::MicroVmBuilder::image`]. Tests and benchmarks call [`assemble`] at run time
//! (no build.rs), writing into a directory they own.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::arch::layout;
use super::error::{KvmError, Result};

/// Directory holding the guest sources shipped with the crate.
pub fn guests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("guests")
}

/// Assembles `guests/<name>.S` into `<out_dir>/<name>.bin` and returns the image bytes.
pub fn assemble(name: &str, out_dir: &Path) -> Result<Vec<u8>> {
    assemble_with(name, out_dir, &[])
}

/// [`assemble`] with symbols defined on the command line (`as --defsym NAME=VALUE`),
/// for guests that take parameters (guests/agent_stream.S: `NFRAMES`, `SLEEP_NS`).
/// The image is `<out_dir>/<name>.bin` whatever the symbols, so each variant needs a
/// directory of its own.
pub fn assemble_with(name: &str, out_dir: &Path, defs: &[(&str, u64)]) -> Result<Vec<u8>> {
    let src = guests_dir().join(format!("{name}.S"));
    assemble_source(name, &src, out_dir, defs)
}

/// Assembles an arbitrary source file (GNU as syntax, `.include` resolved in guests/).
pub fn assemble_file(name: &str, src: &Path, out_dir: &Path) -> Result<Vec<u8>> {
    assemble_source(name, src, out_dir, &[])
}

fn assemble_source(name: &str, src: &Path, out_dir: &Path, defs: &[(&str, u64)]) -> Result<Vec<u8>> {
    let err = |reason: String| KvmError::Assemble { name: name.to_string(), reason };
    std::fs::create_dir_all(out_dir).map_err(|e| err(format!("create {}: {e}", out_dir.display())))?;
    let obj = out_dir.join(format!("{name}.o"));
    let bin = out_dir.join(format!("{name}.bin"));
    let run = |cmd: &mut Command| -> Result<()> {
        let out = cmd.output().map_err(|e| err(format!("{cmd:?}: {e}")))?;
        if !out.status.success() {
            return Err(err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr))));
        }
        Ok(())
    };
    let mut assemble = Command::new("as");
    assemble.arg("--64").arg("-I").arg(guests_dir());
    for (sym, value) in defs {
        assemble.arg("--defsym").arg(format!("{sym}={value}"));
    }
    run(assemble.arg("-o").arg(&obj).arg(src))?;
    run(Command::new("ld")
        .args(["-m", "elf_x86_64", "-nostdlib", "-static", "--oformat", "binary", "-e", "_start"])
        .arg(format!("-Ttext={:#x}", layout::LOAD_ADDR))
        .arg("-o")
        .arg(&bin)
        .arg(&obj))?;
    std::fs::read(&bin).map_err(|e| err(format!("read {}: {e}", bin.display())))
}
