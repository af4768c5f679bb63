-- Persistent children (companion tools): the name a parent calls a child by and how it
-- waits on the child's turns (`blocking` or `non_blocking`); NULL for a sub-agent call's
-- child.
ALTER TABLE subsessions ADD COLUMN name TEXT;
ALTER TABLE subsessions ADD COLUMN mode TEXT;
