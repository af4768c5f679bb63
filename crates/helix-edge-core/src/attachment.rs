//! Files a user attaches to a message, or a tool gives with its result
//! ([`ToolContext::attach`](crate::tool::ToolContext::attach)): images and other files
//! (PDF, text…), inline as base64 or by URL. They are checked when submitted (media
//! type, encoding, size, URL scheme) and reach each provider in its own content-part
//! form.

use crate::wire::wire_enum;
use serde::{Deserialize, Serialize};

/// At most this many attachments per message.
pub const MAX_ATTACHMENTS: usize = 10;
/// An inline attachment holds at most this many bytes (decoded): its base64 text, about
/// 683 KiB, fits a request body (1 MiB).
pub const MAX_ATTACHMENT_BYTES: usize = 512 * 1024;
/// The longest attachment URL.
pub const MAX_URL_LEN: usize = 2048;

wire_enum! {
    /// What an attachment is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum AttachmentKind {
        /// A picture (`image/png`, `image/jpeg`, `image/gif`, `image/webp`).
        Image = "image",
        /// Any other file (`application/pdf`, `text/plain`…).
        File = "file",
    }
}

/// A file attached to a user message: exactly one of `data` (base64) and `url`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attachment {
    /// `image` or `file`.
    #[serde(rename = "type")]
    pub kind: AttachmentKind,
    /// Its IANA media type.
    pub media_type: String,
    /// The content, base64-encoded (standard alphabet, padded).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::wire::present"
    )]
    pub data: Option<String>,
    /// Where the provider fetches it (`https://` or `http://`).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::wire::present"
    )]
    pub url: Option<String>,
    /// A file name, shown to the model where the provider takes one.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::wire::present"
    )]
    pub name: Option<String>,
}

const IMAGE_TYPES: &[&str] = &["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Whether `t` looks like `type/subtype`.
fn is_media_type(t: &str) -> bool {
    let Some((top, sub)) = t.split_once('/') else {
        return false;
    };
    let token = |s: &str, extra: &str| {
        !s.is_empty()
            && s.len() <= 127
            && s.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || extra.as_bytes().contains(&b)
            })
    };
    token(top, "-") && token(sub, "-+.")
}

impl Attachment {
    /// An image, inline: `data` is its content in base64 (standard alphabet, padded).
    pub fn image(media_type: impl Into<String>, data: impl Into<String>) -> Self {
        Self::inline(AttachmentKind::Image, media_type.into(), data.into())
    }

    /// Any other file (a PDF, text…), inline: `data` is its content in base64.
    pub fn file(media_type: impl Into<String>, data: impl Into<String>) -> Self {
        Self::inline(AttachmentKind::File, media_type.into(), data.into())
    }

    /// A file the provider fetches from `url`.
    pub fn at_url(
        kind: AttachmentKind,
        media_type: impl Into<String>,
        url: impl Into<String>,
    ) -> Self {
        Self {
            url: Some(url.into()),
            data: None,
            ..Self::inline(kind, media_type.into(), String::new())
        }
    }

    /// With a file name, shown to the model where the provider takes one.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    fn inline(kind: AttachmentKind, media_type: String, data: String) -> Self {
        Self {
            kind,
            media_type,
            data: Some(data),
            url: None,
            name: None,
        }
    }

    /// Checks the attachment; the error says what is wrong, for a 400.
    pub fn validate(&self) -> Result<(), String> {
        self.validate_up_to(MAX_ATTACHMENT_BYTES)
    }

    /// [`validate`](Self::validate), with inline data of at most `max` bytes (decoded).
    pub(crate) fn validate_up_to(&self, max: usize) -> Result<(), String> {
        match self.kind {
            AttachmentKind::Image if !IMAGE_TYPES.contains(&self.media_type.as_str()) => {
                return Err(format!(
                    "an image's mediaType must be one of {}, not '{}'",
                    IMAGE_TYPES.join(", "),
                    self.media_type
                ));
            }
            AttachmentKind::File if !is_media_type(&self.media_type) => {
                return Err(format!("'{}' is not a media type", self.media_type));
            }
            _ => {}
        }
        match (&self.data, &self.url) {
            (Some(data), None) => {
                let bytes = base64_len(data)
                    .ok_or("data is not valid base64 (standard alphabet, padded)")?;
                if bytes > max {
                    return Err(format!(
                        "an inline attachment holds at most {max} bytes, not {bytes}; pass a url instead"
                    ));
                }
                Ok(())
            }
            (None, Some(url)) => {
                let rest = url
                    .strip_prefix("https://")
                    .or_else(|| url.strip_prefix("http://"));
                let visible = |r: &str| !r.is_empty() && r.bytes().all(|b| b.is_ascii_graphic());
                if !rest.is_some_and(visible) || url.len() > MAX_URL_LEN {
                    return Err(format!(
                        "url must be an http(s) URL of visible ASCII characters, at most {MAX_URL_LEN}"
                    ));
                }
                Ok(())
            }
            _ => Err("an attachment has exactly one of data and url".into()),
        }
    }

    /// The content as a `data:` URL, for inline attachments.
    pub fn data_url(&self) -> Option<String> {
        let data = self.data.as_ref()?;
        Some(format!("data:{};base64,{data}", self.media_type))
    }

    /// How the model is told about an attachment its provider cannot take.
    pub fn placeholder(&self) -> String {
        let name = self.name.as_deref().unwrap_or("a file");
        match &self.url {
            Some(url) => format!("[Attachment: {name} ({}) at {url}]", self.media_type),
            None => format!(
                "[Attachment: {name} ({}), not readable by this model]",
                self.media_type
            ),
        }
    }
}

/// The length of what base64 `data` decodes to, if it is valid base64 (standard
/// alphabet, padded to a multiple of four). Checked without decoding: nothing here
/// needs the bytes, and providers take base64 as it is.
fn base64_len(data: &str) -> Option<usize> {
    let bytes = data.as_bytes();
    if !bytes.len().is_multiple_of(4) {
        return None;
    }
    let padding = bytes.iter().rev().take_while(|&&b| b == b'=').count();
    let body = &bytes[..bytes.len() - padding];
    let alphabet = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    (padding <= 2 && body.iter().all(alphabet)).then(|| bytes.len() / 4 * 3 - padding)
}

/// Checks a message's attachments.
pub fn validate_all(attachments: &[Attachment]) -> Result<(), String> {
    if attachments.len() > MAX_ATTACHMENTS {
        return Err(format!(
            "a message has at most {MAX_ATTACHMENTS} attachments"
        ));
    }
    for (i, a) in attachments.iter().enumerate() {
        a.validate().map_err(|e| format!("attachments[{i}]: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(v: serde_json::Value) -> Attachment {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn attachments_are_checked_for_type_encoding_size_and_url() {
        let png = parse(json!({"type": "image", "mediaType": "image/png", "data": "iVBORw0KGgo="}));
        assert_eq!(png.validate(), Ok(()));
        assert_eq!(
            png.data_url().unwrap(),
            "data:image/png;base64,iVBORw0KGgo="
        );
        let bad = |v| parse(v).validate().unwrap_err();
        assert!(
            bad(json!({"type": "image", "mediaType": "image/tiff", "data": "AA=="}))
                .contains("image/png")
        );
        assert!(
            bad(json!({"type": "file", "mediaType": "pdf", "data": "AA=="})).contains("media type")
        );
        assert!(
            bad(json!({"type": "file", "mediaType": "application/pdf", "data": "not base64!"}))
                .contains("base64")
        );
        assert!(
            bad(json!({"type": "file", "mediaType": "application/pdf"})).contains("exactly one")
        );
        assert!(
            bad(json!({"type": "image", "mediaType": "image/png", "url": "ftp://x/y.png"}))
                .contains("http")
        );
        let big = "A".repeat((MAX_ATTACHMENT_BYTES + 3) / 3 * 4);
        assert!(
            bad(json!({"type": "file", "mediaType": "text/plain", "data": big}))
                .contains("at most")
        );
        let url = parse(
            json!({"type": "file", "mediaType": "application/pdf", "url": "https://e.x/a.pdf", "name": "a.pdf"}),
        );
        assert_eq!(url.validate(), Ok(()));
        assert_eq!(
            url.placeholder(),
            "[Attachment: a.pdf (application/pdf) at https://e.x/a.pdf]"
        );
        let text = parse(json!({"type": "file", "mediaType": "text/plain", "data": "aMOpbGxv"}));
        assert_eq!(text.validate(), Ok(()));
        assert!(
            serde_json::from_value::<Attachment>(
                json!({"type": "image", "mediaType": "image/png", "size": 1})
            )
            .is_err()
        );
        for (data, len) in [
            ("", Some(0)),
            ("AA==", Some(1)),
            ("AAA=", Some(2)),
            ("AAAA", Some(3)),
        ] {
            assert_eq!(base64_len(data), len, "{data}");
        }
        for bad in ["A", "AA=A", "A===", "AA-_", "AAA=AAAA"] {
            assert_eq!(base64_len(bad), None, "{bad}");
        }
        let many = vec![png; MAX_ATTACHMENTS + 1];
        assert!(validate_all(&many).unwrap_err().contains("at most"));
    }
}
