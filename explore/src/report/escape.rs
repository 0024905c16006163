//! Guest text made safe to show: control characters and bidi overrides
//! spelled out, long text cut, HTML special characters escaped. Every view
//! passes untrusted text (console lines, message summaries, names) through
//! [`sanitize`] or [`esc`].

use std::fmt::Write as _;

/// Terminal escape sequences left out: CSI (`ESC [ ... m`, colours and
/// cursor moves), OSC (`ESC ] ... BEL` or `ESC ] ... ESC \\`, titles and
/// links) and two-character escapes (`ESC 7`, `ESC c`). An escape that is
/// cut short is kept (then [`sanitize`] spells its ESC out).
pub fn strip_ansi(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(s);
    }
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let mut kept = 0;
    while i < b.len() {
        if b[i] != 0x1b {
            i += 1;
            continue;
        }
        let end = match b.get(i + 1) {
            Some(b'[') => {
                let mut j = i + 2;
                while j < b.len() && (0x20..=0x3f).contains(&b[j]) {
                    j += 1;
                }
                (j < b.len() && (0x40..=0x7e).contains(&b[j])).then_some(j + 1)
            }
            Some(b']') => {
                let mut j = i + 2;
                loop {
                    match b.get(j) {
                        Some(0x07) => break Some(j + 1),
                        Some(0x1b) if b.get(j + 1) == Some(&b'\\') => break Some(j + 2),
                        Some(_) => j += 1,
                        None => break None,
                    }
                }
            }
            Some(c) if (0x30..=0x7e).contains(c) => Some(i + 2),
            _ => None,
        };
        match end {
            Some(e) => {
                out.push_str(&s[kept..i]);
                kept = e;
                i = e;
            }
            None => i += 1,
        }
    }
    out.push_str(&s[kept..]);
    std::borrow::Cow::Owned(out)
}

/// Makes untrusted text safe to show anywhere: terminal escape sequences
/// (colours) are left out ([`strip_ansi`]), other control characters and
/// bidi overrides become `\xNN` / `\u{NNNN}`, tabs become spaces, and text
/// longer than `max_chars` is cut with a note.
pub fn sanitize(s: &str, max_chars: usize) -> String {
    let s = &*strip_ansi(s);
    let mut out = String::with_capacity(s.len().min(max_chars.saturating_add(16)));
    for (n, c) in s.chars().enumerate() {
        if n >= max_chars {
            let rest = s.chars().count() - n;
            let _ = write!(out, "… (+{rest} chars)");
            break;
        }
        match c {
            '\t' => out.push(' '),
            c if (c as u32) < 0x80 && c.is_control() => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control()
                || ('\u{202a}'..='\u{202e}').contains(&c)
                || ('\u{2066}'..='\u{2069}').contains(&c)
                || c == '\u{200e}'
                || c == '\u{200f}' =>
            {
                let _ = write!(out, "\\u{{{:04x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out
}

/// Sanitised and cut to at most `n` characters with a plain `…` (for labels).
pub fn clip(s: &str, n: usize) -> String {
    let prefix: String = s.chars().take(n + 1).collect();
    let clean = sanitize(&prefix, usize::MAX);
    if clean.chars().count() <= n {
        clean
    } else {
        let mut out: String = clean.chars().take(n.saturating_sub(1)).collect();
        out.push('…');
        out
    }
}

/// HTML/XML escaping of already sanitised text.
pub(crate) fn esc_html(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Sanitise, cut to `max_chars`, escape for HTML.
pub fn esc(s: &str, max_chars: usize) -> String {
    esc_html(&sanitize(s, max_chars))
}
