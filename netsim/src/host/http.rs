//! Just enough HTTP/1.1 for a workload to talk to the clusters' servers
//! (busybox httpd, etcd's JSON gateway): request builders and an
//! incremental response reader.
//!
//! The reader follows RFC 9112 §6.3 for where a body ends, in this order:
//! no body for `HEAD`, 1xx, 204 and 304; `Transfer-Encoding: chunked`;
//! `Content-Length`; otherwise the body runs until the server closes.
//! Interim 1xx responses (other than 101) are skipped. Bare-LF line ends are
//! accepted, because a reader that rejects them gains nothing here.

use super::conn::ConnError;
use crate::addr::NodeId;

/// Longest accepted response head (status line plus headers).
pub const MAX_HEAD: usize = 64 * 1024;
/// Longest accepted chunk-size or trailer line.
const MAX_LINE: usize = 4096;

/// A complete response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpResponse {
    /// The status code, e.g. 200.
    pub status: u16,
    /// The reason phrase, e.g. "OK" (may be empty).
    pub reason: String,
    /// In received order, names as sent.
    pub headers: Vec<(String, String)>,
    /// De-chunked body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// First header called `name`, ignoring ASCII case.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The body as text, invalid UTF-8 replaced.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Why an HTTP exchange produced no response.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    /// The connection failed (refused, reset, timed out).
    #[error(transparent)]
    Conn(#[from] ConnError),
    /// No complete response within the request timeout.
    #[error("no complete response before the request timeout")]
    TimedOut,
    /// The bytes are not an HTTP/1.1 response (the message says where).
    #[error("malformed response: {0}")]
    Malformed(String),
    /// The server closed the connection mid-response.
    #[error("connection closed after {received} bytes, before the response was complete")]
    Truncated {
        /// Bytes of the response received before the close.
        received: usize,
    },
}

/// `METHOD path HTTP/1.1` with `Host`, `Connection: close`, the given
/// headers, and `Content-Length` when there is a body.
pub fn request(method: &str, host: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut r = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() || matches!(method, "POST" | "PUT" | "PATCH") {
        r.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    r.push_str("\r\n");
    let mut r = r.into_bytes();
    r.extend_from_slice(body);
    r
}

/// `GET path` to node `to`.
pub fn get(to: NodeId, path: &str) -> Vec<u8> {
    request("GET", &host(to), path, &[], b"")
}

/// `POST path` to node `to` with a JSON body (etcd's gateway speaks JSON).
pub fn post_json(to: NodeId, path: &str, json: &str) -> Vec<u8> {
    request("POST", &host(to), path, &[("Content-Type", "application/json")], json.as_bytes())
}

fn host(n: NodeId) -> String {
    let [a, b, c, d] = n.ipv4();
    format!("{a}.{b}.{c}.{d}")
}

#[derive(Debug)]
enum Framing {
    None,
    Length(usize),
    Chunked(Chunk),
    UntilClose,
}

#[derive(Clone, Copy, Debug)]
enum Chunk {
    Size,
    Data(usize),
    DataEnd,
    Trailers,
}

#[derive(Debug)]
struct Head {
    status: u16,
    reason: String,
    headers: Vec<(String, String)>,
    framing: Framing,
}

/// Accumulates response bytes until one response is complete.
#[derive(Debug)]
pub(crate) struct ResponseReader {
    head_request: bool,
    buf: Vec<u8>,
    /// Parse position in `buf` (start of the head, then of unparsed body).
    pos: usize,
    head: Option<Head>,
    body: Vec<u8>,
    received: usize,
}

impl ResponseReader {
    /// For the response to `request` (a `HEAD` response has no body).
    pub fn new(request: &[u8]) -> ResponseReader {
        ResponseReader {
            head_request: request.starts_with(b"HEAD "),
            buf: Vec::new(),
            pos: 0,
            head: None,
            body: Vec::new(),
            received: 0,
        }
    }

    pub fn feed(&mut self, data: &[u8]) {
        self.received += data.len();
        self.buf.extend_from_slice(data);
    }

    /// `Ok(Some)` once complete; `eof` says the server finished sending.
    pub fn poll(&mut self, eof: bool) -> Result<Option<HttpResponse>, HttpError> {
        while self.head.is_none() {
            let Some((head, end)) = parse_head(&self.buf[self.pos..], self.head_request)? else {
                return self.incomplete(eof);
            };
            self.pos += end;
            // Interim responses (100 Continue, 103 Early Hints) precede the real one.
            if (100..200).contains(&head.status) && head.status != 101 {
                continue;
            }
            self.head = Some(head);
        }
        let done = match &mut self.head.as_mut().expect("parsed above").framing {
            Framing::None => true,
            Framing::UntilClose => {
                self.body.extend_from_slice(&self.buf[self.pos..]);
                self.pos = self.buf.len();
                eof
            }
            Framing::Length(n) => {
                let take = (*n - self.body.len()).min(self.buf.len() - self.pos);
                self.body.extend_from_slice(&self.buf[self.pos..self.pos + take]);
                self.pos += take;
                self.body.len() == *n
            }
            Framing::Chunked(st) => dechunk(st, &self.buf, &mut self.pos, &mut self.body)?,
        };
        if !done {
            return self.incomplete(eof);
        }
        let h = self.head.take().expect("parsed above");
        Ok(Some(HttpResponse {
            status: h.status,
            reason: h.reason,
            headers: h.headers,
            body: std::mem::take(&mut self.body),
        }))
    }

    fn incomplete(&self, eof: bool) -> Result<Option<HttpResponse>, HttpError> {
        if eof {
            Err(HttpError::Truncated { received: self.received })
        } else {
            Ok(None)
        }
    }
}

/// Position just past the next line end at or after `from`, and the line
/// without its `\r\n` / `\n`.
fn line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let nl = buf[from..].iter().position(|&b| b == b'\n')? + from;
    let l = &buf[from..nl];
    Some((l.strip_suffix(b"\r").unwrap_or(l), nl + 1))
}

fn malformed(what: impl Into<String>) -> HttpError {
    HttpError::Malformed(what.into())
}

/// The head at the start of `buf` and its length, or `None` if incomplete.
fn parse_head(buf: &[u8], head_request: bool) -> Result<Option<(Head, usize)>, HttpError> {
    let mut lines = Vec::new();
    let mut at = 0;
    let end = loop {
        let Some((l, next)) = line(buf, at) else {
            if buf.len() > MAX_HEAD {
                return Err(malformed(format!("head longer than {MAX_HEAD} bytes")));
            }
            return Ok(None);
        };
        if l.is_empty() {
            break next;
        }
        lines.push(l);
        at = next;
    };
    let Some((status_line, header_lines)) = lines.split_first() else {
        return Err(malformed("empty status line"));
    };
    let status_line = std::str::from_utf8(status_line).map_err(|_| malformed("status line is not UTF-8"))?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") {
        return Err(malformed(format!("not an HTTP/1.x status line: {status_line:?}")));
    }
    let status = parts
        .next()
        .filter(|s| s.len() == 3)
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| malformed(format!("bad status code in {status_line:?}")))?;
    let reason = parts.next().unwrap_or_default().to_string();
    let mut headers = Vec::with_capacity(header_lines.len());
    for l in header_lines {
        let l = String::from_utf8_lossy(l);
        let (k, v) = l.split_once(':').ok_or_else(|| malformed(format!("header without colon: {l:?}")))?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let get = |name: &'static str| headers.iter().filter(move |(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v);
    let framing = if head_request || (100..200).contains(&status) || status == 204 || status == 304 {
        Framing::None
    } else if get("transfer-encoding").any(|v| v.to_ascii_lowercase().contains("chunked")) {
        Framing::Chunked(Chunk::Size)
    } else if let Some(v) = get("content-length").next() {
        let n = v.parse::<usize>().map_err(|_| malformed(format!("bad Content-Length {v:?}")))?;
        if get("content-length").any(|w| w != v) {
            return Err(malformed("conflicting Content-Length headers"));
        }
        Framing::Length(n)
    } else {
        Framing::UntilClose
    };
    Ok(Some((Head { status, reason, headers, framing }, end)))
}

/// Decodes as much of a chunked body as has arrived; `true` when complete.
fn dechunk(st: &mut Chunk, buf: &[u8], pos: &mut usize, body: &mut Vec<u8>) -> Result<bool, HttpError> {
    loop {
        match *st {
            Chunk::Size | Chunk::Trailers => {
                let Some((l, next)) = line(buf, *pos) else {
                    if buf.len() - *pos > MAX_LINE {
                        return Err(malformed("chunk line too long"));
                    }
                    return Ok(false);
                };
                *pos = next;
                if let Chunk::Trailers = st {
                    if l.is_empty() {
                        return Ok(true);
                    }
                    continue;
                }
                let hex = l.split(|&b| b == b';').next().unwrap_or_default();
                let hex = std::str::from_utf8(hex).unwrap_or("").trim();
                let n = usize::from_str_radix(hex, 16)
                    .map_err(|_| malformed(format!("bad chunk size {:?}", String::from_utf8_lossy(l))))?;
                *st = if n == 0 { Chunk::Trailers } else { Chunk::Data(n) };
            }
            Chunk::Data(n) => {
                let take = n.min(buf.len() - *pos);
                body.extend_from_slice(&buf[*pos..*pos + take]);
                *pos += take;
                if take < n {
                    *st = Chunk::Data(n - take);
                    return Ok(false);
                }
                *st = Chunk::DataEnd;
            }
            Chunk::DataEnd => {
                let Some((l, next)) = line(buf, *pos) else {
                    return Ok(false);
                };
                if !l.is_empty() {
                    return Err(malformed("chunk data not followed by a line end"));
                }
                *pos = next;
                *st = Chunk::Size;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `resp` in pieces of `step` bytes; returns the first result.
    fn read(req: &[u8], resp: &[u8], step: usize, eof_at_end: bool) -> Result<Option<HttpResponse>, HttpError> {
        let mut r = ResponseReader::new(req);
        for piece in resp.chunks(step.max(1)) {
            r.feed(piece);
            if let Some(done) = r.poll(false)? {
                return Ok(Some(done));
            }
        }
        r.poll(eof_at_end)
    }

    #[test]
    fn content_length_any_split() {
        let resp = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: x\r\n\r\nhello";
        for step in 1..resp.len() {
            let r = read(b"GET / HTTP/1.1\r\n\r\n", resp, step, false).unwrap().unwrap();
            assert_eq!((r.status, r.reason.as_str(), r.body.as_slice()), (200, "OK", &b"hello"[..]));
            assert_eq!(r.header("server"), Some("x"));
        }
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let resp =
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\n";
        for step in 1..resp.len() {
            let r = read(b"GET /", resp, step, false).unwrap().unwrap();
            assert_eq!(r.body, b"wikipedia");
        }
    }

    #[test]
    fn until_close_interim_and_bodyless() {
        let resp = b"HTTP/1.0 100 Continue\r\n\r\nHTTP/1.0 404 Not Found\nX: 1\n\nbody";
        assert_eq!(read(b"GET /", resp, 3, false).unwrap(), None);
        let r = read(b"GET /", resp, 3, true).unwrap().unwrap();
        assert_eq!((r.status, r.body.as_slice()), (404, &b"body"[..]));
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n";
        assert_eq!(read(b"HEAD / HTTP/1.1", head, 7, false).unwrap().unwrap().body, b"");
        let no_content = b"HTTP/1.1 204 No Content\r\n\r\n";
        assert_eq!(read(b"DELETE /", no_content, 100, false).unwrap().unwrap().status, 204);
    }

    #[test]
    fn errors() {
        let short = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc";
        assert_eq!(read(b"GET /", short, 100, true), Err(HttpError::Truncated { received: short.len() }));
        assert!(matches!(read(b"GET /", b"SSH-2.0-x\r\n\r\n", 100, false), Err(HttpError::Malformed(_))));
        assert!(matches!(
            read(b"GET /", b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 100, false),
            Err(HttpError::Malformed(_))
        ));
    }

    #[test]
    fn builders() {
        let n = NodeId::new(3).unwrap();
        assert_eq!(get(n, "/x"), b"GET /x HTTP/1.1\r\nHost: 10.0.0.3\r\nConnection: close\r\n\r\n");
        let p = post_json(n, "/v3/kv/put", "{}");
        assert!(p.ends_with(b"Content-Length: 2\r\n\r\n{}"));
    }
}
