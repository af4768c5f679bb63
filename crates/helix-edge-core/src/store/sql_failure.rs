//! What a failed SQL statement's message says: SQLite (and D1 on it) reports failures in
//! English; they are matched here, once.

/// What a failed SQL statement's message says. SQLite (and D1 on it) reports failures
/// in English; they are matched here, once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SqlFailure<'a> {
    /// A UNIQUE or PRIMARY KEY constraint failed on `table.column`.
    Unique(&'a str),
    /// A CHECK constraint failed (the compare-and-set guard of a commit).
    Check,
    /// The schema lacks a table or a column the statement names: a migration is missing.
    Schema,
    /// Anything else.
    Other,
}

impl<'a> SqlFailure<'a> {
    /// Classifies `message`.
    pub fn of(message: &'a str) -> Self {
        if let Some(at) = message.find("UNIQUE constraint failed: ") {
            let rest = &message[at + "UNIQUE constraint failed: ".len()..];
            let end = rest.find([':', ' ', ',', ')']).unwrap_or(rest.len());
            return Self::Unique(&rest[..end]);
        }
        if message.contains("CHECK constraint failed") {
            return Self::Check;
        }
        let schema = ["no such table", "no such column", "has no column named"];
        if schema.iter().any(|s| message.contains(s)) {
            return Self::Schema;
        }
        Self::Other
    }
}

#[cfg(test)]
mod tests {
    use super::SqlFailure;

    #[test]
    fn d1_failures_are_classified_from_their_messages() {
        let unique = "D1_ERROR: UNIQUE constraint failed: sessions.id: SQLITE_CONSTRAINT";
        assert_eq!(SqlFailure::of(unique), SqlFailure::Unique("sessions.id"));
        assert_eq!(
            SqlFailure::of("UNIQUE constraint failed: messages.session_id, messages.seq"),
            SqlFailure::Unique("messages.session_id")
        );
        let check = "D1_ERROR: CHECK constraint failed: ok = 1: SQLITE_CONSTRAINT";
        assert_eq!(SqlFailure::of(check), SqlFailure::Check);
        for schema in [
            "D1_ERROR: no such table: sessions: SQLITE_ERROR",
            "no such column: replicated_version",
            "table sessions has no column named lag",
        ] {
            assert_eq!(SqlFailure::of(schema), SqlFailure::Schema, "{schema}");
        }
        assert_eq!(
            SqlFailure::of("Network connection lost."),
            SqlFailure::Other
        );
    }
}
