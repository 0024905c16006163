//! Compose's variable interpolation, as far as a simulation can take it:
//! no variable has a value (a run must not depend on the shell that starts
//! it), so `$$` is a literal `$`, `${VAR:-default}` and `${VAR-default}`
//! are their default, and any other reference is refused.

/// `s` interpolated; `Err` names the first variable without a default.
pub(crate) fn interpolate(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        rest = &rest[at + 1..];
        if let Some(r) = rest.strip_prefix('$') {
            out.push('$');
            rest = r;
        } else if let Some(r) = rest.strip_prefix('{') {
            let end = r.find('}').ok_or_else(|| format!("${{{r}: no closing brace"))?;
            let inner = &r[..end];
            let default = inner.split_once(":-").or_else(|| inner.split_once('-')).map(|(_, d)| d);
            match default {
                Some(d) => out.push_str(d),
                None => return Err(format!("${{{inner}}}")),
            }
            rest = &r[end + 1..];
        } else {
            let name_end = rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
            if name_end == 0 {
                out.push('$');
            } else {
                return Err(format!("${}", &rest[..name_end]));
            }
        }
    }
    out.push_str(rest);
    Ok(out)
}
