-- Schedules (helix-edge's `schedules` feature): each session's schedules as its object
-- last sent them, one row each, so that `GET /v1/schedules` lists the fires due across
-- sessions. `next_fire_at` in ms; `body` the schedule's view (JSON), as
-- `GET /v1/sessions/{id}/schedules` shows it.
CREATE TABLE schedules (
  session_id TEXT NOT NULL,
  schedule_id TEXT NOT NULL,
  agent TEXT NOT NULL,
  next_fire_at INTEGER NOT NULL,
  body TEXT NOT NULL,
  PRIMARY KEY (session_id, schedule_id)
);

CREATE INDEX schedules_by_fire ON schedules (next_fire_at, session_id, schedule_id);
