//! The command line against docs/reference.md: every flag documented, every
//! subcommand's exit codes in its --help and in the reference.

use super::command;

/// docs/reference.md's section `### simcluster SUB`: its lines.
fn section(doc: &str, sub: &str) -> Vec<String> {
    let heading = format!("### simcluster {sub}");
    let mut lines = doc.lines().skip_while(|l| l.trim_end() != heading);
    assert!(lines.next().is_some(), "docs/reference.md has no section {heading:?}");
    lines.take_while(|l| !l.starts_with("## ") && !l.starts_with("### ")).map(str::to_string).collect()
}

fn reference() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/reference.md");
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The clap command of `sub` (`run`, `image build`).
fn subcommand(sub: &str) -> clap::Command {
    let mut c = command();
    for word in sub.split(' ') {
        c = c.find_subcommand(word).unwrap_or_else(|| panic!("no subcommand {sub}")).clone();
    }
    c
}

#[test]
fn the_reference_documents_every_flag_and_no_other() {
    let doc = reference();
    for (sub, _) in simcluster::exit_codes::TABLE {
        let lines = section(&doc, sub);
        let documented: Vec<String> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("| `--"))
            .map(|l| format!("--{}", l.split([' ', '`']).next().unwrap_or("")))
            .collect();
        let cmd = subcommand(sub);
        let flags: Vec<String> = cmd
            .get_arguments()
            .filter_map(|a| a.get_long())
            .filter(|l| !matches!(*l, "help" | "version"))
            .map(|l| format!("--{l}"))
            .collect();
        let missing: Vec<&String> = flags.iter().filter(|f| !documented.contains(f)).collect();
        assert!(missing.is_empty(), "docs/reference.md, simcluster {sub}: undocumented {missing:?}");
        let unknown: Vec<&String> = documented.iter().filter(|f| !flags.contains(f)).collect();
        assert!(unknown.is_empty(), "docs/reference.md, simcluster {sub}: no such flag {unknown:?}");
    }
}

#[test]
fn every_subcommand_has_its_exit_codes_in_help_and_in_the_reference() {
    let doc = reference();
    let top: Vec<String> = command().get_subcommands().map(|c| c.get_name().to_string()).collect();
    for (sub, rows) in simcluster::exit_codes::TABLE {
        let lines = section(&doc, sub);
        for (code, meaning) in *rows {
            let row = format!("| {code} | {meaning} |");
            assert!(lines.iter().any(|l| l.trim_end() == row), "docs/reference.md, simcluster {sub}: no row {row}");
        }
        // (--help wraps its lines to the terminal: compare words.)
        let words = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        let help = subcommand(sub).render_long_help().to_string();
        let want = words(&simcluster::exit_codes::help(sub));
        assert!(words(&help).contains(&want), "simcluster {sub} --help lacks {want:?}: {help}");
    }
    // Every subcommand (and image's) is in the table.
    for name in top {
        let listed = simcluster::exit_codes::TABLE.iter().any(|(s, _)| s.split(' ').next() == Some(name.as_str()));
        assert!(listed || name == "help", "simcluster {name} has no exit codes in exit_codes::TABLE");
    }
}
