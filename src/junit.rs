//! `--junit FILE`: a run's (or merged shards') result as JUnit XML, the
//! format CI systems show as a test report.
//!
//! One test suite, named after the cluster. One test case per execution
//! (`execution 7`), failing with the failure's headline as its message and
//! the whole message, the execution seed and the replay command as its
//! text; one per failing crash-state sibling (`execution 7, crash state
//! 2`); one per `[[expect]] reached` name (`expect reached NAME`), failing
//! when no execution reached it; one per Antithesis SDK assertion
//! (`antithesis Always "MESSAGE"`), failing with its verdict's reason. The
//! run's seed, strategy, trace hash and
//! images hash are suite properties. The file is written whole or not at
//! all.
//!
//! Written here rather than with quick-junit (nextest's serializer): the
//! format is a few elements, and that crate brings chrono, uuid and
//! quick-xml into a build whose cold time in CI is at its limit.
//! tests/junit.rs reads the output with a JUnit parser (junit-parser).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Result;

use crate::run::summary::FailingExecution;
use crate::run::Summary;

/// One test case: its name and, when it failed, (type, message, text).
struct Case {
    name: String,
    failure: Option<(&'static str, String, String)>,
}

/// The JUnit XML of `summary`, for cluster `cluster` whose `[[expect]]
/// reached` names are `expects` (`simcluster merge`, which has no cluster
/// file, passes the unreached ones).
pub fn report(summary: &Summary, cluster: &str, expects: &[String]) -> String {
    let mut cases = Vec::new();
    for i in 0..summary.executions {
        let failed = summary.failing_executions.iter().find(|f| f.execution == i && f.crash_state.is_none());
        cases.push(execution_case(format!("execution {i}"), failed));
    }
    for f in summary.failing_executions.iter().filter(|f| f.crash_state.is_some()) {
        let name = format!("execution {}, crash state {}", f.execution, f.crash_state.unwrap_or(0));
        cases.push(execution_case(name, Some(f)));
    }
    for name in expects {
        let failure = summary.unreached.contains(name).then(|| {
            let message = format!("no execution of {} printed \"@reached {name}\"", summary.executions);
            ("unreached", message, String::new())
        });
        cases.push(Case { name: format!("expect reached {name}"), failure });
    }
    for p in summary.antithesis.values() {
        let failure = p.why.map(|why| {
            let text = p.count.first_failure.clone().map(|f| format!("first failure {f}")).unwrap_or_default();
            ("assertion", format!("Antithesis assertion {} {why}", p.count.title()), text)
        });
        cases.push(Case { name: format!("antithesis {}", p.count.title()), failure });
    }
    let failures = cases.iter().filter(|c| c.failure.is_some()).count();
    let time = summary.wall_seconds.max(0.0);
    let mut x = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        x,
        "<testsuites name=\"simcluster\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" time=\"{time:.3}\">",
        cases.len()
    );
    let _ = writeln!(
        x,
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\" time=\"{time:.3}\">",
        esc(cluster),
        cases.len()
    );
    x.push_str("    <properties>\n");
    for (k, v) in [
        ("seed", summary.seed.to_string()),
        ("strategy", summary.strategy.clone()),
        ("trace_hash", summary.figures.trace_hash.clone()),
        ("images_hash", summary.images_hash.clone()),
        ("runtime", summary.runtime.clone()),
    ] {
        let _ = writeln!(x, "      <property name=\"{k}\" value=\"{}\"/>", esc(&v));
    }
    x.push_str("    </properties>\n");
    for c in &cases {
        let _ = write!(x, "    <testcase name=\"{}\" classname=\"{}\"", esc(&c.name), esc(cluster));
        match &c.failure {
            None => x.push_str("/>\n"),
            Some((ty, message, text)) => {
                let _ = writeln!(
                    x,
                    ">\n      <failure type=\"{ty}\" message=\"{}\">{}</failure>",
                    esc(message),
                    esc_text(text)
                );
                x.push_str("    </testcase>\n");
            }
        }
    }
    x.push_str("  </testsuite>\n</testsuites>\n");
    x
}

/// An execution's test case; `failed` is its failure, if it failed.
fn execution_case(name: String, failed: Option<&FailingExecution>) -> Case {
    let failure = failed.map(|f| {
        let mut text = format!("{}\n\nexecution seed: {}\n", f.message, f.seed);
        match &f.failure_file {
            Some(p) => text.push_str(&format!("replay with: simcluster replay {}\n", p.display())),
            None => text.push_str(
                "(no failure file: the run's --failure-budget was spent, or it was recorded by a simcluster that \
                     wrote the first failing execution's only)\n",
            ),
        }
        ("failure", f.message.lines().next().unwrap_or("").to_string(), text)
    });
    Case { name, failure }
}

/// `s` as an XML attribute value in double quotes: `&`, `<`, `>` and `"`
/// escaped, and characters XML 1.0 cannot hold (control characters other
/// than tab, newline and carriage return: a guest's console may print
/// anything) replaced by U+FFFD.
fn esc(s: &str) -> String {
    esc_text(s).replace('"', "&quot;")
}

/// `s` as XML character data: as [`esc`], quotes left as they are (some
/// JUnit readers split text at every entity).
fn esc_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\t' | '\n' | '\r' => out.push(ch),
            c if (c as u32) < 0x20 || c == '\u{fffe}' || c == '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// Writes `report(summary, cluster, expects)` to `path`, atomically.
pub fn write(path: &Path, summary: &Summary, cluster: &str, expects: &[String]) -> Result<()> {
    crate::outputs::write_atomic(path, report(summary, cluster, expects).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::{esc, esc_text};

    #[test]
    fn escapes_what_xml_cannot_hold_as_is() {
        assert_eq!(esc("a<b>&\"c'"), "a&lt;b&gt;&amp;&quot;c'");
        assert_eq!(esc_text("a\"b"), "a\"b");
        assert_eq!(esc_text("tab\there\nnul\u{0}bell\u{7}"), "tab\there\nnul\u{fffd}bell\u{fffd}");
    }
}
