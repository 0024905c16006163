//! Where in cluster.toml a check's complaint is, as a typed path: the
//! table (`[faults.pause]`) or array of tables (`[[invariant]]`), then keys
//! and elements of arrays. It renders as the start of the message a person
//! reads, and `locate` walks it in the parsed document to find the line,
//! so neither the checks nor the locator deal in message text.

use std::fmt;

use engine::TomlKey;

/// A place in cluster.toml.
///
/// Invariant: `header` is non-empty and each of its segments is a bare key
/// (the tables simcluster defines); `steps` may be empty (the table itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyPath {
    header: Vec<&'static str>,
    /// `[[header]]` rather than `[header]`.
    array: bool,
    steps: Vec<Step>,
}

/// One step below the header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Step {
    /// A key of the current table.
    Key(String),
    /// An element of the current array (an array of tables, or an
    /// array-valued key): its 0-based index, which `locate` follows, and
    /// the name messages use for it (`None`: `#K`, 1-based).
    Element { index: usize, name: Option<String> },
}

impl KeyPath {
    /// The table `[dotted]`; `dotted` is simcluster's own table name
    /// (`"faults.pause"`), bare segments only.
    pub fn table(dotted: &'static str) -> KeyPath {
        KeyPath { header: dotted.split('.').collect(), array: false, steps: Vec::new() }
    }

    /// The array of tables `[[dotted]]`.
    pub fn array(dotted: &'static str) -> KeyPath {
        KeyPath { array: true, ..KeyPath::table(dotted) }
    }

    /// This path, then key `key`.
    pub fn key(&self, key: impl Into<String>) -> KeyPath {
        self.then(Step::Key(key.into()))
    }

    /// This path, then element `index` (0-based) of the array it names,
    /// written `#K` (1-based).
    pub fn nth(&self, index: usize) -> KeyPath {
        self.then(Step::Element { index, name: None })
    }

    /// This path, then element `index` (0-based) of the array it names,
    /// written by its `name`.
    pub fn named(&self, index: usize, name: impl Into<String>) -> KeyPath {
        self.then(Step::Element { index, name: Some(name.into()) })
    }

    /// The problem `detail` at this place. `detail` follows the path in the
    /// message as written, so it starts with its own separator: `" = 3:
    /// must be ..."`, `": ..."`, `" is empty: ..."`.
    pub fn invalid(&self, detail: impl Into<String>) -> Invalid {
        Invalid { at: self.clone(), detail: detail.into() }
    }

    /// The table's segments and the steps below it, for `locate`.
    pub(super) fn walk(&self) -> (&[&'static str], &[Step]) {
        (&self.header, &self.steps)
    }

    fn then(&self, step: Step) -> KeyPath {
        let mut p = self.clone();
        p.steps.push(step);
        p
    }
}

/// `[a.b] key`, `[[a]] #2: key`, `[a] links."n1-n2".loss`, `[a] requests
/// #2: node`: a key follows the header or an element after a space or ": ",
/// another key after a dot; an element follows after a space.
impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (open, close) = if self.array { ("[[", "]]") } else { ("[", "]") };
        write!(f, "{open}{}{close}", self.header.join("."))?;
        let mut after_element = false;
        for (i, step) in self.steps.iter().enumerate() {
            match step {
                Step::Key(k) => {
                    let sep = if after_element {
                        ": "
                    } else if i == 0 {
                        " "
                    } else {
                        "."
                    };
                    write!(f, "{sep}{}", TomlKey(k))?;
                    after_element = false;
                }
                Step::Element { index, name } => {
                    match name {
                        Some(name) => write!(f, " {name}")?,
                        None => write!(f, " #{}", index + 1)?,
                    }
                    after_element = true;
                }
            }
        }
        Ok(())
    }
}

/// A value cluster.toml's checks refuse: where it is and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{at}{detail}")]
pub struct Invalid {
    /// Where: rendered as the message's start, walked to find the line.
    pub at: KeyPath,
    /// What is wrong, starting with its separator (see [`KeyPath::invalid`]).
    pub detail: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_as_messages_write_them() {
        let cases = [
            (KeyPath::table("check").key("history"), "[check] history"),
            (KeyPath::table("faults.pause").key("length").key("min"), "[faults.pause] length.min"),
            (KeyPath::array("invariant").nth(1).key("name"), "[[invariant]] #2: name"),
            (KeyPath::array("liveness").named(0, "up").key("within"), "[[liveness]] up: within"),
            (KeyPath::table("workload.host").key("requests").nth(1).key("node"), "[workload.host] requests #2: node"),
            (
                KeyPath::table("faults.network").key("links").key("n1-n2").key("loss"),
                "[faults.network] links.\"n1-n2\".loss",
            ),
            (KeyPath::table("faults.network").key("links").key("n1->n2"), "[faults.network] links.\"n1->n2\""),
            (KeyPath::table("image").key("files").key("/etc/a \"b\""), "[image] files.\"/etc/a \\\"b\\\"\""),
            (KeyPath::table("workload"), "[workload]"),
        ];
        for (path, want) in cases {
            assert_eq!(path.to_string(), want);
        }
        assert_eq!(
            KeyPath::table("disk").key("size_mb").invalid(" = 8: too small").to_string(),
            "[disk] size_mb = 8: too small"
        );
    }
}
