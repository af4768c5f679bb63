//! The sinks a deployment configures, read from its vars: `NOTIFY_WEBHOOK_URL` (one URL,
//! or several separated by commas), `NOTIFY_WEBHOOK_SECRET` (signs each body, Standard
//! Webhooks style), `NOTIFY_WEBHOOK_FORMAT` (`json`, the default, or `slack`),
//! `PUBLIC_URL` (the worker's own origin, for the links a notification carries) and
//! `DECISION_LINK_TTL_SECS` (how long a decision link holds, default a week).

/// A notification's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// helix-edge's own JSON body.
    Json,
    /// A Slack message (`text` and `blocks`, Approve / Deny as link buttons), for an
    /// incoming webhook.
    Slack,
}

/// A webhook sink.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Webhook {
    /// Where the notifications are POSTed.
    pub url: String,
    /// The key each body is signed with, if one is configured.
    pub secret: Option<Vec<u8>>,
    /// The body's format.
    pub format: Format,
}

/// A deployment's notifications.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notify {
    /// The sinks, in the order configured (a notification's key names its sink's index).
    pub webhooks: Vec<Webhook>,
    /// The worker's public origin (`https://agents.example.com`): links are absolute with
    /// it, paths without.
    pub public_url: Option<String>,
    /// How long a decision link holds (seconds).
    pub link_ttl_secs: u64,
}

/// A week: how long a decision link holds by default.
pub const DEFAULT_LINK_TTL_SECS: u64 = 7 * 24 * 3600;

impl Notify {
    /// The notifications `var` configures: `Ok(None)` when no sink is set; an error
    /// naming the var that is wrong.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let Some(urls) = var("NOTIFY_WEBHOOK_URL").filter(|u| !u.trim().is_empty()) else {
            return Ok(None);
        };
        let format = match var("NOTIFY_WEBHOOK_FORMAT").as_deref().map(str::trim) {
            None | Some("") | Some("json") => Format::Json,
            Some("slack") => Format::Slack,
            Some(other) => {
                return Err(format!(
                    "NOTIFY_WEBHOOK_FORMAT is {other:?}: it takes \"json\" or \"slack\""
                ));
            }
        };
        let secret = var("NOTIFY_WEBHOOK_SECRET")
            .filter(|s| !s.is_empty())
            .map(|s| secret_key(&s))
            .transpose()?;
        let mut webhooks = Vec::new();
        for url in urls.split(',').map(str::trim).filter(|u| !u.is_empty()) {
            if !(url.starts_with("https://") || url.starts_with("http://")) {
                return Err(format!(
                    "NOTIFY_WEBHOOK_URL has {url:?}, not an http(s) URL"
                ));
            }
            // A signing key proves nothing over a wire anyone can read and write.
            if secret.is_some() && !crate::provider::secure_url(url) {
                return Err(format!(
                    "NOTIFY_WEBHOOK_URL has {url:?}: plain http to a host that is not this machine (use https)"
                ));
            }
            let (secret, format) = (secret.clone(), format);
            webhooks.push(Webhook {
                url: url.to_string(),
                secret,
                format,
            });
        }
        let public_url = var("PUBLIC_URL")
            .map(|u| u.trim().trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty());
        if let Some(u) = &public_url
            && !(u.starts_with("https://") || u.starts_with("http://"))
        {
            return Err(format!("PUBLIC_URL is {u:?}, not an http(s) origin"));
        }
        // Slack takes only absolute URLs for its buttons.
        if format == Format::Slack && public_url.is_none() {
            return Err(
                "PUBLIC_URL is not set: NOTIFY_WEBHOOK_FORMAT=slack needs it for the buttons' links"
                    .into(),
            );
        }
        let link_ttl_secs = match var("DECISION_LINK_TTL_SECS") {
            None => DEFAULT_LINK_TTL_SECS,
            Some(v) => match v.trim().parse::<u64>() {
                Ok(secs) if secs > 0 => secs,
                _ => {
                    return Err(format!(
                        "DECISION_LINK_TTL_SECS is {v:?}: a positive number"
                    ));
                }
            },
        };
        Ok(Some(Self {
            webhooks,
            public_url,
            link_ttl_secs,
        }))
    }

    /// `path` as a link: absolute with the public origin, else as it is.
    pub fn link(&self, path: &str) -> String {
        match &self.public_url {
            Some(origin) => format!("{origin}{path}"),
            None => path.to_string(),
        }
    }
}

/// A signing secret's key: Standard Webhooks' `whsec_<base64>` decoded, any other
/// string as its bytes.
fn secret_key(secret: &str) -> Result<Vec<u8>, String> {
    use base64::Engine;
    match secret.strip_prefix("whsec_") {
        Some(encoded) => base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .map_err(|_| "NOTIFY_WEBHOOK_SECRET starts with whsec_ but is not base64".to_string()),
        None => Ok(secret.as_bytes().to_vec()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    #[test]
    fn nothing_is_configured_without_a_url() {
        assert_eq!(Notify::from_vars(vars(&[])), Ok(None));
        assert_eq!(
            Notify::from_vars(vars(&[("NOTIFY_WEBHOOK_URL", " ")])),
            Ok(None)
        );
    }

    #[test]
    fn sinks_their_format_secret_and_links_are_read() {
        let n = Notify::from_vars(vars(&[
            (
                "NOTIFY_WEBHOOK_URL",
                "https://a.example/h, http://127.0.0.1:9/x",
            ),
            ("NOTIFY_WEBHOOK_FORMAT", "slack"),
            ("NOTIFY_WEBHOOK_SECRET", "whsec_c2VjcmV0"),
            ("PUBLIC_URL", "https://agents.example/"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(n.webhooks.len(), 2);
        assert_eq!(n.webhooks[1].url, "http://127.0.0.1:9/x");
        assert_eq!(n.webhooks[0].secret.as_deref(), Some(&b"secret"[..]));
        assert_eq!(n.webhooks[0].format, Format::Slack);
        assert_eq!(n.link("/v1/x"), "https://agents.example/v1/x");
        assert_eq!(n.link_ttl_secs, DEFAULT_LINK_TTL_SECS);
    }

    #[test]
    fn what_is_wrong_names_its_var() {
        for (pairs, var) in [
            (
                vec![("NOTIFY_WEBHOOK_URL", "ftp://x")],
                "NOTIFY_WEBHOOK_URL",
            ),
            (
                vec![
                    ("NOTIFY_WEBHOOK_URL", "http://hooks.example/x"),
                    ("NOTIFY_WEBHOOK_SECRET", "s"),
                ],
                "NOTIFY_WEBHOOK_URL",
            ),
            (
                vec![
                    ("NOTIFY_WEBHOOK_URL", "https://h"),
                    ("NOTIFY_WEBHOOK_FORMAT", "xml"),
                ],
                "NOTIFY_WEBHOOK_FORMAT",
            ),
            (
                vec![
                    ("NOTIFY_WEBHOOK_URL", "https://h"),
                    ("NOTIFY_WEBHOOK_SECRET", "whsec_!!"),
                ],
                "NOTIFY_WEBHOOK_SECRET",
            ),
            (
                vec![
                    ("NOTIFY_WEBHOOK_URL", "https://h"),
                    ("DECISION_LINK_TTL_SECS", "0"),
                ],
                "DECISION_LINK_TTL_SECS",
            ),
            (
                vec![("NOTIFY_WEBHOOK_URL", "https://h"), ("PUBLIC_URL", "x.y")],
                "PUBLIC_URL",
            ),
            (
                vec![
                    ("NOTIFY_WEBHOOK_URL", "https://h"),
                    ("NOTIFY_WEBHOOK_FORMAT", "slack"),
                ],
                "PUBLIC_URL",
            ),
        ] {
            let err = Notify::from_vars(vars(&pairs)).unwrap_err();
            assert!(err.starts_with(var), "{err}");
        }
    }
}
