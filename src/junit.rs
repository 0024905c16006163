//! `--junit FILE`: a run's (or merged shards') result as JUnit XML, the
//! format CI systems show as a test report.
//!
//! One test suite, named after the cluster. One test case per execution
//! (`execution 7`), failing with the failure's headline as its message and
//! the whole message and the replay command as its text; one per failing
//! crash-state sibling (`execution 7, crash state 2`); one per `[[expect]]
//! reached` name (`expect reached NAME`), failing when no execution
//! reached it. The run's seed, strategy, trace hash and images hash are
//! suite properties. The file is written whole or not at all.

use std::path::Path;
use std::time::Duration;

use anyhow::Result;
use quick_junit::{NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestSuite};

use crate::run::Summary;

/// The JUnit report of `summary`, for cluster `cluster` whose `[[expect]]
/// reached` names are `expects` (`simcluster merge`, which has no cluster
/// file, passes the unreached ones).
pub fn report(summary: &Summary, cluster: &str, expects: &[String]) -> Report {
    let mut suite = TestSuite::new(cluster);
    for (k, v) in [
        ("seed", summary.seed.to_string()),
        ("strategy", summary.strategy.clone()),
        ("trace_hash", summary.figures.trace_hash.clone()),
        ("images_hash", summary.images_hash.clone()),
        ("runtime", summary.runtime.clone()),
    ] {
        suite.add_property(Property::new(k, v));
    }
    for i in 0..summary.executions {
        let failed = summary.failing_executions.iter().find(|f| f.execution == i && f.crash_state.is_none());
        suite.add_test_case(case(format!("execution {i}"), cluster, failed));
    }
    for f in summary.failing_executions.iter().filter(|f| f.crash_state.is_some()) {
        let name = format!("execution {}, crash state {}", f.execution, f.crash_state.unwrap_or(0));
        suite.add_test_case(case(name, cluster, Some(f)));
    }
    for name in expects {
        let status = if summary.unreached.contains(name) {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(format!("no execution of {} printed \"@reached {name}\"", summary.executions));
            s.set_type("unreached");
            s
        } else {
            TestCaseStatus::success()
        };
        let mut c = TestCase::new(format!("expect reached {name}"), status);
        c.set_classname(cluster);
        suite.add_test_case(c);
    }
    let mut report = Report::new("simcluster");
    report.set_time(Duration::from_secs_f64(summary.wall_seconds.max(0.0)));
    report.add_test_suite(suite);
    report
}

/// One execution's test case; `failed` is its failure, if it failed.
fn case(name: String, cluster: &str, failed: Option<&crate::run::summary::FailingExecution>) -> TestCase {
    let status = match failed {
        None => TestCaseStatus::success(),
        Some(f) => {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message(f.message.lines().next().unwrap_or("").to_string());
            let mut text = format!("{}\n\nexecution seed: {}\n", f.message, f.seed);
            match &f.failure_file {
                Some(p) => text.push_str(&format!("replay with: simcluster replay {}\n", p.display())),
                None => text.push_str(
                    "(no failure file: a run, or a shard, writes one for its first failing execution only)\n",
                ),
            }
            s.set_description(text);
            s
        }
    };
    let mut c = TestCase::new(name, status);
    c.set_classname(cluster);
    c
}

/// Writes `report(summary, cluster, expects)` to `path`, atomically.
pub fn write(path: &Path, summary: &Summary, cluster: &str, expects: &[String]) -> Result<()> {
    let xml = report(summary, cluster, expects).to_string()?;
    crate::outputs::write_atomic(path, xml.as_bytes())
}
