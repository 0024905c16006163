//! Exit codes, one table for every subcommand.
//!
//! The same meaning has the same number everywhere: 0 the command did what
//! it was asked and found nothing wrong, 1 the answer is "no" (a property
//! failed, a history is not valid, a failure did not reproduce, nothing
//! could be removed), 2 bad input, 3 a simulator or host error, 4 no
//! verdict, 130 interrupted. `--help` of each subcommand prints its rows
//! ([`help`]), and docs/reference.md's tables are checked against them (a
//! test in src/cli/tests.rs), so neither can drift from the code.

/// Success: no property failed / reproduced / valid / built.
pub const OK: u8 = 0;
/// The answer is "no" (see each subcommand's row).
pub const NO: u8 = 1;
/// Bad input: the message names the file and the problem; nothing is written.
pub const BAD_INPUT: u8 = 2;
/// A simulator or host error.
pub const HOST_ERROR: u8 = 3;
/// No verdict: a bounded search ran out before deciding.
pub const NO_VERDICT: u8 = 4;
/// Interrupted by Ctrl-C, SIGTERM or SIGHUP.
pub const INTERRUPTED: u8 = 130;

const BAD: (u8, &str) = (BAD_INPUT, "bad input: the message names the file and the problem; nothing is written");
const HOST: (u8, &str) = (HOST_ERROR, "a simulator or host error (the message says which)");
const INTR: (u8, &str) = (
    INTERRUPTED,
    "interrupted (Ctrl-C, SIGTERM, SIGHUP): every node is stopped, the execution in progress writes nothing",
);

/// Every subcommand's exit codes, in the order `--help` and
/// docs/reference.md list them. The key is the subcommand as typed
/// (`image build`).
pub const TABLE: &[(&str, &[(u8, &str)])] = &[
    (
        "run",
        &[
            (OK, "every execution passed (and every [[expect]] name was reached)"),
            (NO, "a property failed, or an [[expect]] name was never reached: the failure file is under --out"),
            BAD,
            HOST,
            INTR,
        ],
    ),
    (
        "replay",
        &[
            (OK, "the execution reproduced: the same trace hash and the same failure"),
            (NO, "it did not reproduce: the first differing trace line is on stderr"),
            BAD,
            HOST,
            INTR,
        ],
    ),
    (
        "shrink",
        &[
            (OK, "a failing execution with fewer faults or decisions was written under OUT/shrunk/"),
            (NO, "no fault or decision could be removed (the failure is written under OUT/shrunk/ as it was)"),
            BAD,
            HOST,
            INTR,
        ],
    ),
    (
        "merge",
        &[
            (OK, "no execution of any shard failed"),
            (NO, "an execution failed: the first is named with its failure file"),
            BAD,
            HOST,
            INTR,
        ],
    ),
    (
        "check",
        &[
            (OK, "the history is valid (linearizable, or allowed by --consistency)"),
            (NO, "it is not: the explanation is on stderr"),
            BAD,
            HOST,
            (
                NO_VERDICT,
                "no verdict: the linearizability search ran out of --max-steps, or a set history has no element \
                 both added and read",
            ),
            INTR,
        ],
    ),
    ("image build", &[(OK, "the images are built (or found in the cache)"), BAD, HOST, INTR]),
    ("image kernel", &[(OK, "the kernel is built (or found in the cache)"), BAD, HOST, INTR]),
];

/// The rows of `subcommand` (as typed: `run`, `image build`).
pub fn rows(subcommand: &str) -> &'static [(u8, &'static str)] {
    TABLE.iter().find(|(s, _)| *s == subcommand).map(|(_, r)| *r).unwrap_or(&[])
}

/// The "Exit codes:" block of `subcommand`'s `--help`.
pub fn help(subcommand: &str) -> String {
    let mut s = String::from("Exit codes:\n");
    for (code, meaning) in rows(subcommand) {
        s.push_str(&format!("  {code:>3}  {meaning}\n"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_subcommand_lists_bad_input_and_host_error_once() {
        for (sub, rows) in TABLE {
            for code in [BAD_INPUT, HOST_ERROR] {
                assert_eq!(rows.iter().filter(|(c, _)| *c == code).count(), 1, "{sub}: exit {code}");
            }
            let mut codes: Vec<u8> = rows.iter().map(|(c, _)| *c).collect();
            codes.dedup();
            assert_eq!(codes.len(), rows.len(), "{sub}: a code listed twice");
        }
        assert!(help("check").contains("  4  no verdict"));
        assert!(rows("no such subcommand").is_empty());
    }
}
