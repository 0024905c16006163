//! Building a [`Recipe`]: unpack the source, patch, configure (base config,
//! the fragment merged over it, `olddefconfig`, [`verify_config`]), `make`
//! with a progress bar and the reproducible environment, and publish the
//! result with its `.config` into the cache.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};

use super::source::{ensure_source, package, source_version};
use super::{ensure_build_deps, Kernel, KernelSeries, Recipe, REPRODUCIBLE_BUILD_ENV};
use crate::image::cache::{build_entry, cache_root, Entry};
use crate::image::host::run_capture;

/// The kernel of `recipe` built from `series`' source, from the cache or
/// built first; `key` names recipe and inputs (`key_of` the source version).
pub(super) fn ensure_built(
    recipe: &Recipe,
    series: KernelSeries,
    key_of: impl Fn(&str) -> String,
    quiet: bool,
) -> Result<Kernel> {
    let version = source_version(series)?;
    let key = key_of(&version);
    let dir = cache_root().join("kernel").join(&key);
    let path = dir.join(recipe.output);
    let what = format!("the {}", recipe.label);
    let entry = build_entry(
        &dir,
        &what,
        quiet,
        || path.is_file(),
        |work| {
            ensure_build_deps(recipe)?;
            let (tarball, fetched) = ensure_source(series)?;
            if fetched != version {
                bail!("{} is {fetched} now, not {version}: run the build again", package(series));
            }
            build(recipe, work, series, &tarball, &version, quiet)
        },
    )?;
    Ok(Kernel { path, key, cached: entry == Entry::Cached, series })
}

/// Builds in `work` (the cache entry's temporary directory) and stages
/// what the entry keeps in `work/out`, returned for publishing: the
/// kernel, its `.config` as `config`, `source-version` and `System.map`.
fn build(
    recipe: &Recipe,
    work: &Path,
    series: KernelSeries,
    tarball: &Path,
    version: &str,
    quiet: bool,
) -> Result<PathBuf> {
    build_in(recipe, work, series, tarball, version, quiet)?;
    let staged = work.join("out");
    std::fs::create_dir_all(&staged)?;
    std::fs::copy(work.join("src").join(recipe.artifact), staged.join(recipe.output))?;
    std::fs::write(staged.join("config"), std::fs::read(work.join("src/.config"))?)?;
    std::fs::write(staged.join("source-version"), format!("{} {version}\n", package(series)))?;
    // The symbol table, for reading a guest's instruction pointers (a panic's
    // backtrace, an exit log's rip): a few hundred KiB, kept beside the kernel.
    let map = work.join("src/System.map");
    if map.exists() {
        std::fs::copy(&map, staged.join("System.map"))?;
    }
    Ok(staged)
}

fn build_in(
    recipe: &Recipe,
    work: &Path,
    series: KernelSeries,
    tarball: &Path,
    version: &str,
    quiet: bool,
) -> Result<()> {
    let package = package(series);
    let pb = if quiet { ProgressBar::hidden() } else { ProgressBar::new_spinner() };
    pb.set_style(ProgressStyle::with_template(&format!("{{spinner}} {}: {{msg}}", recipe.label)).unwrap());
    pb.enable_steady_tick(std::time::Duration::from_millis(200));
    pb.set_message(format!("unpacking {package} {version}"));
    run_capture(Command::new("tar").arg("-C").arg(work).arg("-xf").arg(tarball))?;
    let src = work.join("src");
    std::fs::rename(work.join(package), &src)
        .with_context(|| format!("{} did not unpack to {package}/", tarball.display()))?;
    for (name, body) in recipe.patches {
        pb.set_message(format!("applying {name}"));
        let p = work.join(name);
        std::fs::write(&p, body)?;
        run_capture(Command::new("patch").current_dir(&src).args(["-p1", "--forward", "-i"]).arg(&p))
            .with_context(|| format!("patch {name} does not apply to {package} {version}"))?;
    }
    pb.set_message("configuring");
    configure(recipe, work, &src)?;
    pb.finish_and_clear();
    make(recipe, &src, quiet)
}

/// `make <base>`, the fragment merged over it, `olddefconfig`, checked.
fn configure(recipe: &Recipe, work: &Path, src: &Path) -> Result<()> {
    let arch = format!("ARCH={}", recipe.arch);
    let frag = work.join("simcluster.config");
    std::fs::write(&frag, recipe.fragment)?;
    run_capture(Command::new("make").current_dir(src).args([arch.as_str(), recipe.base_config]))?;
    run_capture(
        Command::new("scripts/kconfig/merge_config.sh").current_dir(src).args(["-m", "-O", ".", ".config"]).arg(&frag),
    )?;
    run_capture(Command::new("make").current_dir(src).args([arch.as_str(), "olddefconfig"]))?;
    verify_config(recipe.fragment, &std::fs::read_to_string(src.join(".config"))?)
}

/// Where a built kernel's debug info says its sources were.
const DEBUG_SOURCE_DIR: &str = "/usr/src/simcluster-kernel";

/// `KCFLAGS`/`KAFLAGS` that replace `src` with [`DEBUG_SOURCE_DIR`] in debug info.
fn debug_prefix_map(src: &Path) -> [(&'static str, String); 2] {
    let map = format!("{}={DEBUG_SOURCE_DIR}", src.display());
    [("KCFLAGS", format!("-fdebug-prefix-map={map}")), ("KAFLAGS", format!("-Wa,--debug-prefix-map={map}"))]
}

/// `make <target>` on every CPU, its progress on a bar; the last messages
/// of a failed build in the error.
fn make(recipe: &Recipe, src: &Path, quiet: bool) -> Result<()> {
    let bar = if quiet { ProgressBar::hidden() } else { ProgressBar::new(recipe.expected_steps) };
    bar.set_style(
        ProgressStyle::with_template(&format!(
            "{}: [{{elapsed_precise}}] {{bar:40}} {{pos}}/~{{len}} {{msg}}",
            recipe.label
        ))
        .unwrap(),
    );
    let jobs = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2);
    let mut child = Command::new("make")
        .current_dir(src)
        .args([format!("ARCH={}", recipe.arch), format!("-j{jobs}"), recipe.target.to_string()])
        // The guest prints its kernel's build stamp at boot, so it is part of
        // every trace: make it a function of the inputs, not of the build
        // host and hour.
        .envs(REPRODUCIBLE_BUILD_ENV.iter().copied())
        // The build directory's name holds the builder's pid, and DWARF's
        // compilation directory would carry it into the binary: map it to
        // one fixed path so that the same inputs give the same bytes on
        // every machine (tests/golden.rs compares the kernel's SHA-256).
        .envs(debug_prefix_map(src))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("cannot run make")?;
    let stderr = child.stderr.take().unwrap();
    let err_thread = std::thread::spawn(move || {
        let mut tail: Vec<String> = Vec::new();
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            tail.push(line);
            if tail.len() > 40 {
                tail.remove(0);
            }
        }
        tail
    });
    for line in BufReader::new(child.stdout.take().unwrap()).lines().map_while(Result::ok) {
        if line.starts_with("  ") {
            bar.inc(1);
            bar.set_message(line.split_whitespace().last().unwrap_or("").to_string());
        }
    }
    let status = child.wait()?;
    let tail = err_thread.join().unwrap_or_default();
    bar.finish_and_clear();
    if !status.success() {
        bail!("{} build failed ({status}); last messages:\n{}", recipe.label, tail.join("\n"));
    }
    Ok(())
}

/// Every `CONFIG_X=y` and `# CONFIG_X is not set` line of `fragment` must
/// have survived `olddefconfig` in `config`; a dependency that silently
/// dropped one would give guests a kernel without, say, time travel.
pub fn verify_config(fragment: &str, config: &str) -> Result<()> {
    let mut lost = Vec::new();
    for line in fragment.lines().map(str::trim) {
        let wanted = if line.starts_with("CONFIG_") || (line.starts_with("# CONFIG_") && line.ends_with(" is not set"))
        {
            line.to_string()
        } else {
            continue;
        };
        let ok = if let Some(name) = wanted.strip_prefix("# ").and_then(|l| l.strip_suffix(" is not set")) {
            !config.lines().any(|l| l.starts_with(&format!("{name}=")))
        } else {
            config.lines().any(|l| l == wanted)
        };
        if !ok {
            lost.push(wanted);
        }
    }
    if !lost.is_empty() {
        bail!("kernel config fragment did not take effect for: {}", lost.join(", "));
    }
    Ok(())
}
