//! A UI message's file parts (`{"type": "file", "mediaType", "url", "filename"?}`, what
//! `useChat` sends for `sendMessage({ files })`) as the user message's attachments: a
//! `data:` URL's base64 content, or an http(s) URL the provider fetches. Checked as every
//! attachment is ([`validate_all`]); anything else is refused, naming the part.

use crate::api::ApiError;
use crate::attachment::{Attachment, AttachmentKind, validate_all};
use serde_json::Value;

/// The attachments of `message`'s file parts, checked.
pub(super) fn attachments_of(message: &Value) -> Result<Vec<Attachment>, ApiError> {
    let parts = message["parts"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    let files = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| p["type"] == "file");
    let attachments = files
        .map(|(i, part)| attachment(part).map_err(|e| invalid(&format!("parts[{i}]: {e}"))))
        .collect::<Result<Vec<_>, _>>()?;
    validate_all(&attachments).map_err(|e| invalid(&format!("the user message's {e}")))?;
    Ok(attachments)
}

/// One file part as an attachment.
fn attachment(part: &Value) -> Result<Attachment, String> {
    let text = |field: &str| part[field].as_str().map(str::to_string);
    let media_type = text("mediaType").ok_or("a file part needs its mediaType")?;
    let url = text("url").ok_or("a file part needs its url")?;
    let (data, url) = match url.strip_prefix("data:") {
        Some(rest) => match rest.split_once(',') {
            Some((head, data)) if head.ends_with(";base64") => (Some(data.to_string()), None),
            _ => return Err("a file part's data: URL must be base64".into()),
        },
        None => (None, Some(url)),
    };
    let kind = match media_type.starts_with("image/") {
        true => AttachmentKind::Image,
        false => AttachmentKind::File,
    };
    Ok(Attachment {
        kind,
        media_type,
        data,
        url,
        name: text("filename"),
    })
}

fn invalid(message: &str) -> ApiError {
    ApiError::validation(format!("messages[-1].{message}."))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn file_parts_become_attachments_and_bad_ones_are_named() {
        let said = json!({"role": "user", "parts": [
            {"type": "text", "text": "What are these?"},
            {"type": "file", "mediaType": "image/png", "url": "data:image/png;base64,iVBORw0KGgo=", "filename": "a.png"},
            {"type": "file", "mediaType": "application/pdf", "url": "https://example.com/r.pdf"}
        ]});
        let [image, pdf] = <[Attachment; 2]>::try_from(attachments_of(&said).unwrap()).unwrap();
        assert_eq!(image.kind, AttachmentKind::Image);
        assert_eq!(
            (image.data.as_deref(), image.url, image.name.as_deref()),
            (Some("iVBORw0KGgo="), None, Some("a.png"))
        );
        assert_eq!(pdf.kind, AttachmentKind::File);
        assert_eq!(pdf.url.as_deref(), Some("https://example.com/r.pdf"));
        let none = json!({"role": "user", "parts": [{"type": "text", "text": "hi"}]});
        assert_eq!(attachments_of(&none).unwrap(), Vec::new());

        for (part, says) in [
            (
                json!({"type": "file", "url": "https://x/a"}),
                "parts[0]: a file part needs its mediaType",
            ),
            (
                json!({"type": "file", "mediaType": "image/png", "url": "data:image/png,abc"}),
                "must be base64",
            ),
            (
                json!({"type": "file", "mediaType": "image/tiff", "url": "data:image/tiff;base64,AAAA"}),
                "attachments[0]",
            ),
            (
                json!({"type": "file", "mediaType": "text/plain", "url": "ftp://x/a.txt"}),
                "attachments[0]",
            ),
        ] {
            let err = attachments_of(&json!({"parts": [part]})).unwrap_err();
            assert!(err.message.contains(says), "{}", err.message);
        }
    }
}
