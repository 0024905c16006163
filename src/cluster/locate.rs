//! Which line of cluster.toml an error message is about, found from the
//! message itself (see [`locate_line`]), so that the checks need not carry
//! positions around.

/// The line (1-based) of `text` that a
/// [`ClusterError::Invalid`](super::ClusterError::Invalid) message is about.
/// Every message of [`Cluster::parse`](super::Cluster::parse) starts with
/// the table it is about, `[section.sub]` or `[[array]]`, then which element
/// of an array (`#K`, 1-based, or the element's name), then the key (`key =
/// value: why`, `key: why`, `key is ...`; a key path such as netsim's
/// `faults.network.links."n1-n2".loss` too, and `key #K: ...` for an element
/// of an array-valued key). The answer is the line of the deepest of those
/// found in the file: the key, else the element's or the table's header (an
/// array's first, when its element cannot be told); `None` when the file
/// does not write the table. Messages written later with the same prefix
/// get lines without any change here.
pub(super) fn locate_line(text: &str, message: &str) -> Option<usize> {
    let doc = toml_edit::ImDocument::parse(text).ok()?;
    let (path, mut rest) = table_prefix(message)?;
    let mut cur = doc.as_item();
    let mut at = None;
    // The last key reached: an array's name, for default element names.
    let mut name = path.last().cloned().unwrap_or_default();
    for seg in &path {
        cur = cur.as_table_like()?.get(seg)?;
        at = cur.span().map(|s| s.start).or(at);
    }
    // Owned from here: an element of an inline array is a `Value`.
    let mut cur = cur.clone();
    loop {
        rest = rest.trim_start();
        if let Some(elements) = array_elements(&cur) {
            let Some((k, after)) = pick_element(&elements, &name, rest) else { break };
            cur = elements[k].clone();
            at = cur.span().map(|s| s.start).or(at);
            rest = after.trim_start().strip_prefix(':').unwrap_or(after);
            continue;
        }
        let Some((mut keys, after)) = key_path(rest) else { break };
        if keys.starts_with(&path) {
            keys.drain(..path.len());
        }
        let mut found = false;
        for k in &keys {
            let Some((key, item)) = cur.as_table_like().and_then(|t| t.get_key_value(k)) else { break };
            at = key.span().map(|s| s.start).or(at);
            let item = item.clone();
            cur = item;
            name.clone_from(k);
            found = true;
        }
        rest = after.trim_start();
        if !found || !rest.starts_with('#') {
            break;
        }
    }
    at.map(|offset| 1 + text[..offset.min(text.len())].matches('\n').count())
}

/// `[a.b] rest` or `[[a.b]] rest` at the start of a message: the table's
/// path and the rest.
fn table_prefix(message: &str) -> Option<(Vec<String>, &str)> {
    let (inner, rest) = match message.strip_prefix("[[") {
        Some(m) => m.split_once("]]")?,
        None => message.strip_prefix('[')?.split_once(']')?,
    };
    let path: Vec<String> = inner.split('.').map(|s| s.trim().to_string()).collect();
    path.iter().all(|s| !s.is_empty()).then_some((path, rest))
}

/// The elements of an array of tables or of an inline array.
fn array_elements(item: &toml_edit::Item) -> Option<Vec<toml_edit::Item>> {
    match item {
        toml_edit::Item::ArrayOfTables(a) => Some(a.iter().map(|t| toml_edit::Item::Table(t.clone())).collect()),
        toml_edit::Item::Value(toml_edit::Value::Array(a)) => {
            Some(a.iter().map(|v| toml_edit::Item::Value(v.clone())).collect())
        }
        _ => None,
    }
}

/// Which element of array `array` `rest` is about, and the rest after what
/// named it: `#K` (1-based), else a first word that is an element's `name`
/// (the last such: a name used twice is reported at its second use) or the
/// default name of the K-th, `ARRAY-K` (`invariant-2`), else `key "value"` /
/// `key = "value"` matching an element's key (the last such, nothing
/// consumed), else the only element.
fn pick_element<'m>(elements: &[toml_edit::Item], array: &str, rest: &'m str) -> Option<(usize, &'m str)> {
    if let Some(digits) = rest.strip_prefix('#') {
        let end = digits.find(|c: char| !c.is_ascii_digit()).unwrap_or(digits.len());
        let k: usize = digits[..end].parse().ok()?;
        return (1..=elements.len()).contains(&k).then(|| (k - 1, &digits[end..]));
    }
    let string_of = |e: &toml_edit::Item, key: &str| e.as_table_like()?.get(key)?.as_str().map(str::to_string);
    let last_with = |key: &str, value: &str| elements.iter().rposition(|e| string_of(e, key).as_deref() == Some(value));
    let word_end = rest.find(|c: char| c == ':' || c.is_whitespace()).unwrap_or(rest.len());
    let word = &rest[..word_end];
    let default_name = word.strip_prefix(array).and_then(|w| w.strip_prefix('-')).and_then(|k| k.parse::<usize>().ok());
    let unnamed = |k: usize| elements.get(k).is_some_and(|e| string_of(e, "name").is_none());
    if let Some(k) = last_with("name", word).or(default_name.filter(|&k| k >= 1 && unnamed(k - 1)).map(|k| k - 1)) {
        return Some((k, &rest[word_end..]));
    }
    if let Some(([key], after)) = key_path(rest).as_ref().map(|(k, a)| (k.as_slice(), *a)) {
        let after = after.trim_start();
        let after = after.strip_prefix('=').unwrap_or(after).trim_start();
        if let Some(value) = after.strip_prefix('"').and_then(|v| v.split_once('"')).map(|(v, _)| v) {
            if let Some(k) = last_with(key, value) {
                return Some((k, rest));
            }
        }
    }
    (elements.len() == 1).then_some((0, rest))
}

/// A key path at the start of `s`: dot-separated bare (`A-Za-z0-9_-`) or
/// double-quoted segments, followed by the end, a space, ':' or '='.
fn key_path(s: &str) -> Option<(Vec<String>, &str)> {
    let mut keys = Vec::new();
    let mut rest = s;
    loop {
        let (seg, after) = match rest.strip_prefix('"') {
            Some(q) => q.split_once('"')?,
            None => {
                let end =
                    rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-')).unwrap_or(rest.len());
                (&rest[..end], &rest[end..])
            }
        };
        if seg.is_empty() {
            return None;
        }
        keys.push(seg.to_string());
        match after.strip_prefix('.') {
            Some(next) => rest = next,
            None => {
                rest = after;
                break;
            }
        }
    }
    (rest.is_empty() || rest.starts_with([' ', ':', '='])).then_some((keys, rest))
}
