//! URLs: the path and decoded query of a request, and the paging of lists.

use super::ApiError;

/// The path and query of an absolute URL (`/a/b?c=d`), without the fragment.
pub fn path_and_query(url: &str) -> &str {
    let rest = url.find("://").map_or(url, |i| &url[i + 3..]);
    let rest = rest.find('/').map_or("/", |i| &rest[i..]);
    rest.split('#').next().unwrap_or("/")
}

/// A URL's origin, `scheme://host[:port]` (the runtime's request URLs are normalised:
/// a lower-case host, no default port); the whole text when it has no `://`.
pub fn origin(url: &str) -> &str {
    let Some(start) = url.find("://").map(|i| i + 3) else {
        return url;
    };
    let end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    &url[..end]
}

/// The decoded `key=value` pairs of a URL's query (`+` is a space, `%XX` a byte).
pub fn query_pairs(url: &str) -> Vec<(String, String)> {
    let query = path_and_query(url).split_once('?').map_or("", |(_, q)| q);
    form_pairs(query)
}

/// The decoded `key=value` pairs of a query string or an
/// `application/x-www-form-urlencoded` body (`+` is a space, `%XX` a byte).
pub fn form_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            let form = |s: &str| percent_decode(&s.replace('+', " "));
            (form(k), form(v))
        })
        .collect()
}

/// Where a client's stream starts and whether it follows the session live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamQuery {
    /// The last sequence the client has (`Last-Event-ID`, else `?after=`; 0: none).
    pub after: u64,
    /// `false` (`?follow=false`): the buffered events only, then the end of the answer.
    pub follow: bool,
}

impl StreamQuery {
    /// Reads `Last-Event-ID` (`last_event_id`) and the query `pairs` of
    /// `GET …/stream`.
    pub fn parse(
        last_event_id: Option<&str>,
        pairs: &[(String, String)],
    ) -> Result<Self, ApiError> {
        let param = |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let after = match last_event_id.or(param("after")) {
            None => 0,
            Some(v) => v.trim().parse::<u64>().map_err(|_| {
                ApiError::validation("Last-Event-ID / after must be a sequence number.")
            })?,
        };
        let follow = param("follow") != Some("false");
        Ok(Self { after, follow })
    }
}

/// `text` with its `%XX` escapes decoded (a malformed one is kept as it is; bytes that
/// are not UTF-8 become U+FFFD).
pub fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .filter(|h| h.iter().all(u8::is_ascii_hexdigit))
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `offset`/`limit` of `GET …/messages`: limit defaults to 50, at most 500.
pub fn page(query: &[(String, String)]) -> Result<MessagesQuery, ApiError> {
    let get = |name: &str| {
        query
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    };
    let number = |name: &str, default: u64| match get(name) {
        None => Ok(default),
        Some(v) => v
            .parse::<u64>()
            .map_err(|_| ApiError::validation(format!("{name} must be a non-negative integer."))),
    };
    let (offset, limit) = (number("offset", 0)?, number("limit", 50)?);
    if !(1..=500).contains(&limit) {
        return Err(ApiError::validation("limit must be between 1 and 500."));
    }
    let include_thinking = match get("includeThinking") {
        None | Some("true") => true,
        Some("false") => false,
        Some(_) => {
            return Err(ApiError::validation(
                "includeThinking must be true or false.",
            ));
        }
    };
    Ok(MessagesQuery {
        offset,
        limit,
        include_thinking,
    })
}

/// The query of `GET /v1/sessions/{id}/messages`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessagesQuery {
    /// The first message (0-based).
    pub offset: u64,
    /// At most this many (1 to 500, default 50).
    pub limit: u64,
    /// Whether assistant messages keep their reasoning (`includeThinking`, default true).
    pub include_thinking: bool,
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_origin_is_the_scheme_host_and_port() {
        assert_eq!(
            origin("http://127.0.0.1:8787/v1/auth?x=1"),
            "http://127.0.0.1:8787"
        );
        assert_eq!(
            origin("https://agents.example.com"),
            "https://agents.example.com"
        );
        assert_eq!(
            origin("https://agents.example.com?q"),
            "https://agents.example.com"
        );
        assert_eq!(
            origin("https://agents.example.com#f"),
            "https://agents.example.com"
        );
        assert_eq!(origin("no scheme"), "no scheme");
    }

    #[test]
    fn a_stream_starts_after_the_last_event_id_then_the_after_parameter() {
        let pairs = |p: &[(&str, &str)]| -> Vec<(String, String)> {
            p.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let q = StreamQuery::parse(None, &[]).unwrap();
        assert_eq!((q.after, q.follow), (0, true));
        let q = StreamQuery::parse(Some(" 7 "), &pairs(&[("after", "3")])).unwrap();
        assert_eq!(q.after, 7, "the header wins");
        let q = StreamQuery::parse(None, &pairs(&[("after", "3"), ("follow", "false")])).unwrap();
        assert_eq!((q.after, q.follow), (3, false));
        let bad = StreamQuery::parse(Some("x"), &[]).unwrap_err();
        assert_eq!(bad.status, 400);
    }

    use super::*;

    #[test]
    fn queries_are_split_and_decoded() {
        let url = "https://h:8/v1/sessions/s/stream?token=a%3Ab%2Bc&after=5&x=a+b&flag&%zz=1#frag";
        assert_eq!(
            path_and_query(url),
            "/v1/sessions/s/stream?token=a%3Ab%2Bc&after=5&x=a+b&flag&%zz=1"
        );
        let pairs = query_pairs(url);
        assert_eq!(pairs[0], ("token".to_string(), "a:b+c".to_string()));
        assert_eq!(pairs[1], ("after".to_string(), "5".to_string()));
        assert_eq!(pairs[2], ("x".to_string(), "a b".to_string()));
        assert_eq!(pairs[3], ("flag".to_string(), String::new()));
        assert_eq!(pairs[4], ("%zz".to_string(), "1".to_string()));
        assert_eq!(path_and_query("https://host"), "/");
        assert!(query_pairs("https://h/p").is_empty());
        assert_eq!(query_pairs("https://h/p?a=%E2%9C%93&b=%")[0].1, "✓");
    }

    #[test]
    fn message_pages_default_to_50_and_cap_at_500() {
        let q = |pairs: &[(&str, &str)]| {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<Vec<_>>()
        };
        let at = |q: MessagesQuery| (q.offset, q.limit, q.include_thinking);
        assert_eq!(at(page(&q(&[])).unwrap()), (0, 50, true));
        assert_eq!(
            at(page(&q(&[
                ("offset", "10"),
                ("limit", "500"),
                ("includeThinking", "false")
            ]))
            .unwrap()),
            (10, 500, false)
        );
        for bad in [
            ("limit", "501"),
            ("limit", "0"),
            ("offset", "-1"),
            ("limit", "x"),
            ("limit", ""),
            ("offset", ""),
            ("includeThinking", "no"),
            ("includeThinking", ""),
        ] {
            assert_eq!(page(&q(&[bad])).unwrap_err().status, 400, "{bad:?}");
        }
    }
}
