//! The companion tools an agent with persistent children gets (names prefixed
//! `companion__`, reserved): `spawnAgent`, `sendMessage`, `listChildren`,
//! `getChildStatus`, `terminateChild`, and `waitForResult` when a kind of child is
//! blocking (built by [`crate::agent::PersistentChild`]'s kinds). The runner carries them
//! out ([`crate::runner`]): each call is recorded
//! durably before it reaches a child, like a sub-agent call.

/// The prefix of companion tool names; no other tool may use it.
pub const COMPANION_PREFIX: &str = "companion__";

/// Child names: 1–40 characters of `a-z`, `0-9` and `-`, starting with a letter or digit
/// (and never holding `-agent-`, which would make one child's id another's).
pub const CHILD_NAME_PATTERN: &str = "^[a-z0-9][a-z0-9-]{0,39}$";

/// What a companion tool does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompanionOp {
    /// Create a named child and start its first turn.
    Spawn,
    /// Start a child's next turn (interrupting the current one).
    Send,
    /// The children and their status.
    List,
    /// One child's status and last output.
    Status,
    /// End a child for good.
    Terminate,
    /// Wait for a child's current turn to end.
    Wait,
}

/// Whether `name` is a valid child name.
pub fn valid_child_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    let first_ok = bytes
        .next()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    first_ok
        && name.len() <= 40
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.contains("-agent-")
}
