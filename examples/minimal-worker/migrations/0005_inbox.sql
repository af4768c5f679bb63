-- The approvals inbox (GET /v1/inbox): the sessions whose head has pending calls, the
-- only ones the inbox reads (a partial index: a session leaves it when its calls are
-- answered).
CREATE INDEX sessions_waiting ON sessions (id)
  WHERE json_array_length(head, '$.pending') > 0;
