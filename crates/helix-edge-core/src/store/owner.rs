//! Who owns a session (SPEC §2c): kept in its head, read and written without derived
//! JSON readers where the runner needs it as a value (a decision's `decidedBy`).

use serde::{Deserialize, Serialize};

/// Who owns a session: the user whose token created it (SPEC §2c), kept in its head.
/// A child session belongs to its root's owner; a session created with the API token
/// (or a session token) has none and is reached by the API token only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Owner {
    /// The user (the token's `sub`).
    pub subject: String,
    /// Their tenant, when the deployment groups users in tenants.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tenant: Option<String>,
}

impl Owner {
    /// The `subject` of a denial no one made: the approval's deadline passed.
    pub const DEADLINE: &'static str = "deadline";
    /// The `subject` of a decision made through a notification's decision link.
    pub const DECISION_LINK: &'static str = "decision-link";

    /// As JSON (`{subject, tenant?}`), written without a derived writer.
    pub fn to_json(&self) -> serde_json::Value {
        let mut v = serde_json::Map::new();
        v.insert("subject".into(), self.subject.as_str().into());
        if let Some(tenant) = &self.tenant {
            v.insert("tenant".into(), tenant.as_str().into());
        }
        v.into()
    }

    /// The owner `v` names (`{subject, tenant?}`), read without a derived reader.
    pub fn from_json(v: &serde_json::Value) -> Option<Self> {
        Some(Self {
            subject: v["subject"].as_str()?.into(),
            tenant: v["tenant"].as_str().map(Into::into),
        })
    }
}
