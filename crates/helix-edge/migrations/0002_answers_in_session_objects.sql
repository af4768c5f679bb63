-- Answers to pending calls moved to each session's Durable Object (its own SQLite, with
-- the stream journal and the execution claims): an approval is durable, and the tool
-- may start, without a D1 round trip. Answers still waiting in D1 when this applies
-- are dropped with the table; the clients re-send them (the call is still pending).
DROP TABLE IF EXISTS answers;
