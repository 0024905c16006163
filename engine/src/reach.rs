//! Reachability lines: a guest prints `@reached NAME` or `@sometimes NAME`
//! on its console when it gets somewhere worth getting to. The engine reads
//! them for `[faults] start_after`; the checker counts them over a run
//! (`checker::reach`).

/// The name a console line reports, if it is a reachability line: its first
/// word after `@reached` or `@sometimes` (leading blanks and a trailing
/// carriage return ignored).
pub fn reached_name(line: &str) -> Option<&str> {
    let rest = line.trim_start();
    let rest = rest.strip_prefix("@reached ").or_else(|| rest.strip_prefix("@sometimes "))?;
    rest.split_whitespace().next()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reachability_lines_name_their_first_word() {
        assert_eq!(reached_name("@reached leader-elected"), Some("leader-elected"));
        assert_eq!(reached_name("  @sometimes split-brain now\r"), Some("split-brain"));
        assert_eq!(reached_name("@reached"), None);
        assert_eq!(reached_name("log: @reached x"), None, "only at the start of a line");
        assert_eq!(reached_name("@reachedx y"), None);
    }
}
