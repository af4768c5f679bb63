//! The D1 schema this version of helix-edge needs: the migrations the `helix-edge`
//! crate ships (in its `migrations/`, applied by a worker with `wrangler d1 migrations
//! apply`), and which of them a database lacks. wrangler records the migrations it
//! applied in the database's `d1_migrations` table; a database that lacks one of ours
//! makes every API request answer 503 `schema_outdated` naming it, never a raw SQL
//! error (the check itself is the platform's).

/// The migrations this version ships, in order (file names, as `d1_migrations` has them).
pub const MIGRATIONS: &[&str] = &[
    "0001_init.sql",
    "0002_sessions_by_update.sql",
    "0003_persistent_children.sql",
    "0004_schedules.sql",
    "0005_inbox.sql",
];

/// How often a database found behind is checked again, in milliseconds.
pub const RECHECK_MS: u64 = 10_000;

/// The migrations of [`MIGRATIONS`] that `applied` lacks.
pub fn missing(applied: &[String]) -> Vec<String> {
    MIGRATIONS
        .iter()
        .filter(|m| !applied.iter().any(|a| a == *m))
        .map(|m| m.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_every_migration_the_crate_ships_in_order() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../helix-edge/migrations");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|name| name.ends_with(".sql"))
            .collect();
        files.sort();
        assert_eq!(files, MIGRATIONS);
    }

    #[test]
    fn missing_names_the_migrations_not_applied() {
        assert_eq!(missing(&[]), MIGRATIONS);
        let all: Vec<String> = MIGRATIONS.iter().map(|m| m.to_string()).collect();
        assert!(missing(&all).is_empty());
        let mut extra = all.clone();
        extra.push("0099_user_own.sql".into());
        assert!(
            missing(&extra).is_empty(),
            "a worker's own migrations are fine"
        );
    }
}
