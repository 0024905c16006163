//! A small deterministic mutation fuzzer for simcluster's trust boundaries
//! (what a guest sends, what a user's file holds), run by `cargo test` in
//! every tier: the fuzz targets' regression tests.
//!
//! The search for new crashes is coverage-guided: the cargo-fuzz targets
//! in `fuzz/` (libFuzzer), which `scripts/fuzz.sh` runs for a fixed time in
//! the full tier. This module keeps what that search found, and the seeds,
//! checked on every `cargo test` on stable Rust without libFuzzer: the
//! same seed gives the same inputs, a crash names the input file that
//! reproduces it, and the corpus (seeds and regression inputs) is plain
//! files under `tests/`. A few thousand mutants per target besides cost a
//! few seconds and keep each target's reach assertions meaningful.
//!
//! [`Target::run`]: every corpus file as it is first (a crash found once
//! and fixed stays a test there), then `iterations` mutants, each one to
//! four edits (bit flips, byte sets, inserts, deletes, duplicated ranges,
//! tokens from the target's dictionary, a splice with another corpus file)
//! of a corpus file. A panic in the target is a crash: the input is written
//! to `target/fuzz-crashes/` and the test fails naming it. Errors the
//! target returns are its business (a parser refusing input is the point).
//!
//! Iterations: the target's count, the same in both tiers (the full tier
//! searches with libFuzzer instead); `SIMCLUSTER_FUZZ_ITERATIONS` overrides
//! it (a long local run).
//!
//! Hangs: an input the target spends more than [`HANG_SECS`] seconds on is
//! a hang (a guest that could stop simcluster): a watchdog thread writes it
//! beside the crashes, prints it, and aborts the test process, which fails
//! the test binary loudly rather than stalling the suite.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

/// The environment variable that sets the number of mutants per target.
pub const ITERATIONS: &str = "SIMCLUSTER_FUZZ_ITERATIONS";

/// Seconds one input may take before it counts as a hang.
pub const HANG_SECS: u64 = 20;

/// Inputs larger than this are cut (parsers see files, not floods).
const MAX_INPUT: usize = 64 * 1024;

/// One fuzz target: its name, corpus and dictionary.
pub struct Target<'a> {
    name: &'a str,
    corpus: Vec<(String, Vec<u8>)>,
    dictionary: &'a [&'a [u8]],
    seed: u64,
}

/// What a run did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Corpus files run as they are.
    pub corpus: usize,
    /// Mutants run.
    pub mutants: u64,
}

impl<'a> Target<'a> {
    /// The target `name`, its corpus the files of `dir` (sorted by name;
    /// at least one). Panics when the directory is empty or unreadable: a
    /// fuzz target without seeds would test nothing.
    pub fn new(name: &'a str, dir: &Path) -> Target<'a> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("fuzz target {name}: corpus {}: {e}", dir.display()))
            .map(|e| e.expect("a corpus entry").path())
            .filter(|p| p.is_file())
            .collect();
        files.sort();
        assert!(!files.is_empty(), "fuzz target {name}: corpus {} is empty", dir.display());
        let corpus = files
            .iter()
            .map(|p| (p.file_name().unwrap().to_string_lossy().into_owned(), std::fs::read(p).expect("corpus file")))
            .collect();
        Target { name, corpus, dictionary: &[], seed: 1 }
    }

    /// Tokens mutants may insert (keywords, delimiters of the format).
    pub fn dictionary(mut self, tokens: &'a [&'a [u8]]) -> Target<'a> {
        self.dictionary = tokens;
        self
    }

    /// Runs the corpus, then `mutants` mutants through `f`; panics (failing
    /// the test) at the first input `f` panics on.
    pub fn run(&self, mutants: u64, mut f: impl FnMut(&[u8])) -> Summary {
        let iterations = std::env::var(ITERATIONS).ok().and_then(|v| v.parse().ok()).unwrap_or(mutants);
        let watchdog = Watchdog::start(self.name);
        for (name, input) in &self.corpus {
            watchdog.now_on(input);
            self.try_one(&format!("corpus file {name}"), input, &mut f);
        }
        let mut rng = simrng::mix::SplitMix64(self.seed);
        for i in 0..iterations {
            let input = self.mutant(&mut rng);
            watchdog.now_on(&input);
            self.try_one(&format!("mutant {i}"), &input, &mut f);
        }
        drop(watchdog);
        let summary = Summary { corpus: self.corpus.len(), mutants: iterations };
        eprintln!("fuzz {}: {} corpus inputs, {} mutants, 0 crashes", self.name, summary.corpus, summary.mutants);
        summary
    }

    fn try_one(&self, what: &str, input: &[u8], f: &mut impl FnMut(&[u8])) {
        if catch_unwind(AssertUnwindSafe(|| f(input))).is_ok() {
            return;
        }
        panic!("fuzz target {}: {what} crashed it (the panic is above); {}", self.name, keep(self.name, input));
    }

    /// A corpus file with one to four edits.
    fn mutant(&self, rng: &mut simrng::mix::SplitMix64) -> Vec<u8> {
        let mut below = |n: usize| (rng.next_u64() % n.max(1) as u64) as usize;
        let mut input = self.corpus[below(self.corpus.len())].1.clone();
        for _ in 0..1 + below(4) {
            let len = input.len();
            match below(8) {
                0 if len > 0 => {
                    let at = below(len);
                    input[at] ^= 1 << below(8);
                }
                1 if len > 0 => {
                    let at = below(len);
                    input[at] = INTERESTING[below(INTERESTING.len())];
                }
                2 => {
                    let (at, byte) = (below(len + 1), below(256) as u8);
                    input.insert(at, byte);
                }
                3 if len > 0 => {
                    let at = below(len);
                    let n = 1 + below((len - at).min(16));
                    input.drain(at..at + n);
                }
                4 if len > 0 => {
                    let at = below(len);
                    let n = 1 + below((len - at).min(32));
                    let copy = input[at..at + n].to_vec();
                    let to = below(len + 1);
                    input.splice(to..to, copy);
                }
                5 if !self.dictionary.is_empty() => {
                    let token = self.dictionary[below(self.dictionary.len())];
                    let to = below(len + 1);
                    input.splice(to..to, token.iter().copied());
                }
                6 => {
                    let other = &self.corpus[below(self.corpus.len())].1;
                    let (cut, from) = (below(len + 1), below(other.len() + 1));
                    input.truncate(cut);
                    input.extend_from_slice(&other[from..]);
                }
                _ if len > 0 => input.truncate(below(len)),
                _ => {}
            }
        }
        input.truncate(MAX_INPUT);
        input
    }
}

/// Writes `input` beside the other crashes and says where, with its bytes:
/// a CI log is often all there is.
fn keep(target: &str, input: &[u8]) -> String {
    let dir = crash_dir();
    let file = dir.join(format!("{target}-{:016x}", simrng::mix::finalise(fnv1a(input))));
    let saved = match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&file, input)) {
        Ok(()) => "written".to_string(),
        Err(e) => format!("could not be written: {e}"),
    };
    let shown = &input[..input.len().min(4096)];
    format!(
        "the input is {} ({saved}). Once fixed, copy it into the target's corpus so it stays a regression test. \
         Its first {} of {} bytes: b\"{}\"",
        file.display(),
        shown.len(),
        input.len(),
        shown.escape_ascii()
    )
}

/// The hang detector of one run: the input being tried and a count that
/// moves with every input, watched by a thread.
struct Watchdog {
    state: std::sync::Arc<std::sync::Mutex<(u64, Vec<u8>, bool)>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watchdog {
    fn start(target: &str) -> Watchdog {
        let state = std::sync::Arc::new(std::sync::Mutex::new((0u64, Vec::new(), false)));
        let (watched, target) = (state.clone(), target.to_string());
        // Host time here measures the test, never a simulation.
        let thread = std::thread::spawn(move || {
            let (mut last, mut still) = (u64::MAX, 0);
            loop {
                std::thread::sleep(std::time::Duration::from_millis(250));
                let s = watched.lock().unwrap_or_else(|e| e.into_inner());
                if s.2 {
                    return;
                }
                still = if s.0 == last { still + 1 } else { 0 };
                last = s.0;
                if still >= HANG_SECS * 4 {
                    eprintln!("fuzz target {target}: an input hung it for {HANG_SECS} s; {}", keep(&target, &s.1));
                    std::process::abort();
                }
            }
        });
        Watchdog { state, thread: Some(thread) }
    }

    /// The run moves on to `input`.
    fn now_on(&self, input: &[u8]) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.0 += 1;
        s.1.clear();
        s.1.extend_from_slice(input);
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).2 = true;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Bytes that break parsers more often than random ones.
const INTERESTING: [u8; 12] = [0, 0xff, 0x7f, 0x80, b'"', b'\\', b'\n', b'[', b']', b'{', b'-', b'9'];

/// The environment variable naming where crashing inputs are written
/// (default: `simcluster-fuzz-crashes` in the temporary directory).
pub const CRASH_DIR: &str = "SIMCLUSTER_FUZZ_CRASHES";

/// Where crashing inputs go.
fn crash_dir() -> PathBuf {
    std::env::var_os(CRASH_DIR)
        .map(PathBuf::from)
        .unwrap_or_else(|| std::env::temp_dir().join("simcluster-fuzz-crashes"))
}

/// FNV-1a of the input: names a crash file (the same input, the same name).
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"[cluster]\nnodes = 3\n").unwrap();
        std::fs::write(dir.path().join("b"), b"{\"x\": 1}").unwrap();
        dir
    }

    #[test]
    fn the_same_seed_gives_the_same_mutants_and_every_corpus_file_runs_first() {
        let dir = corpus();
        let seen = |n| {
            let mut inputs = Vec::new();
            Target::new("t", dir.path()).run(n, |i| inputs.push(i.to_vec()));
            inputs
        };
        let (one, two) = (seen(50), seen(50));
        assert_eq!(one, two);
        assert_eq!(one.len(), 52);
        assert_eq!(&one[..2], &[b"[cluster]\nnodes = 3\n".to_vec(), b"{\"x\": 1}".to_vec()]);
        assert!(one[2..].iter().any(|m| m != &one[0] && m != &one[1]), "no mutant differs from the corpus");
    }

    #[test]
    fn a_panicking_target_fails_naming_the_input_file() {
        let dir = corpus();
        let r = catch_unwind(|| {
            Target::new("panics", dir.path()).run(10, |i| assert!(!i.starts_with(b"{"), "boom"));
        });
        let msg = r.unwrap_err();
        let msg = msg.downcast_ref::<String>().expect("a formatted panic");
        assert!(msg.contains("corpus file b crashed it") && msg.contains("fuzz-crashes/panics-"), "{msg}");
        assert!(msg.contains("b\"{\\\"x\\\": 1}\""), "the message shows the input: {msg}");
    }
}
