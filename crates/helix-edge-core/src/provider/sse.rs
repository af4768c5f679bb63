//! An incremental Server-Sent Events framer (the WHATWG event-stream format): bytes in,
//! events out, for any split of the input — inside a line, between CR and LF, inside a
//! UTF-8 sequence. Handles LF, CRLF and CR line ends, comments, multi-line `data`, `id`,
//! and a leading BOM. No IO: the caller feeds whatever bytes arrived.

use crate::error::ProviderError;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any (`message` is the default meaning).
    pub event: Option<String>,
    /// The `data:` lines joined with `\n`.
    pub data: String,
    /// The last `id:` seen, if any.
    pub id: Option<String>,
}

/// Turns a byte stream into [`SseEvent`]s.
#[derive(Debug, Default)]
pub struct SseFramer {
    /// Bytes of an incomplete line.
    pending: Vec<u8>,
    /// The previous feed ended with CR: an LF at the start of the next one belongs to it.
    after_cr: bool,
    /// Nothing was read yet (a BOM may start the stream).
    started: bool,
    event: Option<String>,
    data: String,
    has_data: bool,
    last_id: Option<String>,
}

impl SseFramer {
    /// A framer at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds `bytes`, appending every event they complete to `out`.
    pub fn feed(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        if !self.started && !bytes.is_empty() {
            self.pending.extend_from_slice(bytes);
            if self.pending.len() < 3 && b"\xEF\xBB\xBF".starts_with(&self.pending) {
                return Ok(()); // Maybe a BOM: wait for more.
            }
            self.started = true;
            let buffered = std::mem::take(&mut self.pending);
            let rest = buffered.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(&buffered);
            return self.feed_started(rest, out);
        }
        if self.after_cr && bytes.first() == Some(&b'\n') {
            bytes = &bytes[1..];
        }
        self.after_cr = false;
        self.feed_started(bytes, out)
    }

    fn feed_started(&mut self, bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        let mut start = 0;
        let mut i = 0;
        while i < bytes.len() {
            let b = bytes[i];
            if b != b'\n' && b != b'\r' {
                i += 1;
                continue;
            }
            if self.pending.is_empty() {
                self.line(&bytes[start..i], out)?;
            } else {
                self.pending.extend_from_slice(&bytes[start..i]);
                let line = std::mem::take(&mut self.pending);
                self.line(&line, out)?;
            }
            i += 1;
            if b == b'\r' {
                if i == bytes.len() {
                    self.after_cr = true;
                } else if bytes[i] == b'\n' {
                    i += 1;
                }
            }
            start = i;
        }
        self.pending.extend_from_slice(&bytes[start..]);
        Ok(())
    }

    fn line(&mut self, raw: &[u8], out: &mut Vec<SseEvent>) -> Result<(), ProviderError> {
        if raw.is_empty() {
            if self.has_data {
                let mut data = std::mem::take(&mut self.data);
                data.pop(); // The last "\n".
                out.push(SseEvent {
                    event: self.event.take(),
                    data,
                    id: self.last_id.clone(),
                });
            }
            self.event = None;
            self.has_data = false;
            return Ok(());
        }
        if raw[0] == b':' {
            return Ok(()); // A comment (often a keep-alive).
        }
        let line = std::str::from_utf8(raw)
            .map_err(|_| ProviderError::Corrupt("the event stream is not valid UTF-8".into()))?;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            _ => {} // `retry` and unknown fields are ignored.
        }
        Ok(())
    }

    /// Whether the stream stopped in the middle of an event (or a line).
    pub fn has_partial_event(&self) -> bool {
        self.has_data || !self.pending.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut framer = SseFramer::new();
        let mut out = Vec::new();
        for chunk in chunks {
            framer.feed(chunk, &mut out).unwrap();
        }
        out
    }

    fn ev(event: Option<&str>, data: &str, id: Option<&str>) -> SseEvent {
        SseEvent {
            event: event.map(String::from),
            data: data.into(),
            id: id.map(String::from),
        }
    }

    #[test]
    fn every_split_of_a_mixed_stream_gives_the_same_events() {
        let stream = "\u{FEFF}: hello\r\nevent: a\r\ndata: one\r\ndata:two\r\n\r\n\
                      id: 7\ndata: é✓📰\n\n\rdata: cr only\r\r: ping\n\ndata\n\nevent: x\n\n"
            .as_bytes();
        let expected = vec![
            ev(Some("a"), "one\ntwo", None),
            ev(None, "é✓📰", Some("7")),
            ev(None, "cr only", Some("7")),
            ev(None, "", Some("7")),
        ];
        assert_eq!(frame_all(&[stream]), expected);
        for k in 0..=stream.len() {
            assert_eq!(
                frame_all(&[&stream[..k], &stream[k..]]),
                expected,
                "split at {k}"
            );
        }
        let bytes: Vec<&[u8]> = stream.chunks(1).collect();
        assert_eq!(frame_all(&bytes), expected, "byte at a time");
    }

    #[test]
    fn invalid_utf8_in_a_line_is_corrupt_and_a_cut_stream_is_noticed() {
        let mut framer = SseFramer::new();
        let mut out = Vec::new();
        assert!(framer.feed(b"data: \xFF\xFE\n\n", &mut out).is_err());
        let mut framer = SseFramer::new();
        framer.feed(b"data: {\"a\":", &mut out).unwrap();
        assert!(out.is_empty());
        assert!(framer.has_partial_event());
    }
}
