-- helix-edge D1 schema. Shipped with the library (crates/helix-edge/migrations); a
-- worker applies it with `wrangler d1 migrations apply DB` (--local for wrangler dev).

-- One row per session: its durable head. `version` is the compare-and-set guard every
-- commit checks and bumps; `head` is the JSON of everything small (status, current run,
-- pending calls, output, error); `interrupt` is set out of band by POST …/interrupt.
CREATE TABLE sessions (
  id               TEXT PRIMARY KEY,
  agent            TEXT NOT NULL,
  status           TEXT NOT NULL,
  version          INTEGER NOT NULL,
  head             TEXT NOT NULL,
  interrupt        TEXT,
  snapshot_version INTEGER NOT NULL,
  created_at       INTEGER NOT NULL,
  updated_at       INTEGER NOT NULL
);

-- The transcript, one row per message.
CREATE TABLE messages (
  session_id TEXT NOT NULL,
  seq        INTEGER NOT NULL,
  body       TEXT NOT NULL,
  PRIMARY KEY (session_id, seq)
);

-- The state as a log: a 'snapshot' (the whole state) or a 'patch' (RFC 6902 operations)
-- per session version that changed it. A commit writes only its patch; a snapshot is
-- written at creation, on restores, and once the patches since the last snapshot
-- outweigh it (src/store/rows.rs), so that loading reads at most about twice the state.
CREATE TABLE state_log (
  session_id TEXT NOT NULL,
  version    INTEGER NOT NULL,
  kind       TEXT NOT NULL CHECK (kind IN ('snapshot', 'patch')),
  body       TEXT NOT NULL,
  PRIMARY KEY (session_id, version)
);

-- Runs (turns), upserted by every commit of the run.
CREATE TABLE runs (
  session_id TEXT NOT NULL,
  run_id     TEXT NOT NULL,
  turn       INTEGER NOT NULL,
  body       TEXT NOT NULL,
  PRIMARY KEY (session_id, run_id)
);

-- Checkpoints reference the session version whose state they restore (rebuilt from
-- state_log) and the transcript length; they copy neither.
CREATE TABLE checkpoints (
  session_id TEXT NOT NULL,
  id         TEXT NOT NULL,
  version    INTEGER NOT NULL,
  body       TEXT NOT NULL,
  PRIMARY KEY (session_id, id)
);

-- Makes a commit batch fail (and roll back) when its compare-and-set updated no row:
-- the batch writes changes() of the guarded UPDATE here, and 0 breaks the CHECK.
CREATE TABLE cas_guard (
  id INTEGER PRIMARY KEY,
  ok INTEGER NOT NULL CHECK (ok = 1)
);

-- Child sessions started by a parent's sub-agent tool calls: the queryable record of
-- which session started which child, and how each ended for its parent. (Answers to
-- pending calls, claims and the stream live in each session's Durable Object.)
CREATE TABLE subsessions (
  parent_id    TEXT NOT NULL,
  child_id     TEXT NOT NULL,
  agent        TEXT NOT NULL,
  tool_call_id TEXT NOT NULL,
  status       TEXT NOT NULL,
  created_at   INTEGER NOT NULL,
  updated_at   INTEGER NOT NULL,
  PRIMARY KEY (parent_id, child_id)
);
