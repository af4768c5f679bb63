-- The session list (GET /v1/sessions) reads sessions newest first, by update time and
-- then id, optionally for one agent or status.
CREATE INDEX sessions_by_update ON sessions (updated_at, id);
