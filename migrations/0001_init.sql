-- helix-edge D1 schema, version 1.
-- Applied with `wrangler d1 migrations apply DB` (--local for wrangler dev).

-- One row per session: the session's durable head. `version` is the compare-and-set
-- guard every step commit checks and bumps.
CREATE TABLE sessions (
  id          TEXT PRIMARY KEY,
  agent       TEXT NOT NULL,
  status      TEXT NOT NULL,
  version     INTEGER NOT NULL DEFAULT 0,
  created_at  INTEGER NOT NULL,
  updated_at  INTEGER NOT NULL
);
