"""Schemathesis hooks for the helix-edge API (`tests/e2e/schemathesis.test.mjs`).

Three rules of the API cannot be written in JSON Schema: a create's `messages` history
must pair every assistant tool call with one tool message (same id and name) before the
next user or assistant message, with call ids unique; a chat's newest user message
needs a text part that is not blank; and `providerOptions` name only a tool of the
session's agent in `toolChoice`, in at most 8 KiB. The document states them in words and the server
refuses a body that breaks them (400 naming what is wrong); this hook keeps generated
cases to bodies that follow them, as a client following the document would send.
A schedule's times and pattern have meaning no schema states (`at` in the future, a
cron pattern that parses and fires, a zone that exists): a generated schedule gets a
valid one of each where the generator wrote a string, and an `every` of at
least an hour, so that the fuzzed sessions do not fire while the suite runs. (Only in
the generating phases, `HELIX_FIX_SCHEDULES=1`: with a `map_case` hook schemathesis's
stateful phase follows no links, and the links lead to no schedule's creation.)
Anything else the generator makes goes to the server as it is.
"""

import json
import os
import re
from datetime import datetime, timedelta, timezone

import schemathesis

# The characters the server counts as blank (`api::is_blank`, the document's NOT_BLANK).
_BLANK = re.compile("[\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff]")


def _text(value):
    return value if isinstance(value, str) else None


def _coherent(history):
    """Whether `history` pairs its calls and answers; True for a malformed one (the
    schema's own checks decide about it)."""
    open_calls, seen = [], set()
    for message in history:
        if not isinstance(message, dict):
            return True
        role = message.get("role")
        if role in ("user", "assistant") and open_calls:
            return False
        if role == "assistant":
            calls = message.get("toolCalls", [])
            if not isinstance(calls, list) or not all(isinstance(c, dict) for c in calls):
                return True
            for call in calls:
                call_id, name = _text(call.get("id")), _text(call.get("name"))
                if call_id is None or name is None:
                    return True
                if call_id in seen:
                    return False
                seen.add(call_id)
                open_calls.append((call_id, name))
        elif role == "tool":
            answer = (_text(message.get("toolCallId")), _text(message.get("toolName")))
            if None in answer:
                return True
            if answer not in open_calls:
                return False
            open_calls.remove(answer)
    return not open_calls


def _says_something(messages):
    """Whether a chat's newest message, if it is the user's, has a non-blank text part;
    True for a malformed list (the schema's own checks decide about it)."""
    if not isinstance(messages, list) or not messages or not isinstance(messages[-1], dict):
        return True
    last = messages[-1]
    parts = last.get("parts")
    if last.get("role") != "user" or not isinstance(parts, list):
        return True
    texts = [p.get("text") for p in parts if isinstance(p, dict) and p.get("type") == "text"]
    text = "".join(t for t in texts if isinstance(t, str))
    return any(not _BLANK.fullmatch(c) for c in text)


def _options_fit(options):
    """Whether a body's `providerOptions` name no tool (which one the session's agent has
    is not in the document) and fit in 8 KiB; True for malformed ones."""
    if not isinstance(options, dict):
        return True
    if isinstance(options.get("toolChoice"), dict):
        return False
    compact = json.dumps(options, ensure_ascii=False, separators=(",", ":"))
    return len(compact.encode()) <= 8 * 1024


def map_case(ctx, case):
    body = case.body
    if case.operation.label != "POST /v1/sessions/{id}/schedules" or not isinstance(body, dict):
        return case
    tomorrow = datetime.now(timezone.utc) + timedelta(days=1)
    if isinstance(body.get("at"), str):
        body["at"] = tomorrow.isoformat(timespec="seconds")
    if isinstance(body.get("until"), str):
        body["until"] = "2099-01-01T00:00:00Z"
    if isinstance(body.get("cron"), str) and body["cron"]:
        body["cron"] = "0 9 * * MON-FRI"
    if isinstance(body.get("timezone"), str) and body["timezone"]:
        body["timezone"] = "Europe/Berlin"
    every = body.get("every")
    if isinstance(every, int) and not isinstance(every, bool) and 1 <= every < 3600:
        body["every"] = 3600
    return case


if os.environ.get("HELIX_FIX_SCHEDULES") == "1":
    schemathesis.hook(map_case)


@schemathesis.hook
def filter_case(ctx, case):
    body = case.body
    if not isinstance(body, dict):
        return True
    if not _options_fit(body.get("providerOptions")):
        return False
    if case.operation.label == "POST /v1/chat":
        return _says_something(body.get("messages"))
    if case.operation.label != "POST /v1/sessions":
        return True
    history = body.get("messages")
    return not isinstance(history, list) or _coherent(history)


def _survive_unparsable_urls():
    """Schemathesis 4.32.5 scans response bodies for same-origin URLs to learn links,
    and its scan raises on a string `urllib` cannot split (`http://[x`, a legal
    attachment URL a transcript echoes back), which aborts the whole run. Such a string
    is simply not a link."""
    from schemathesis.engine import observations

    scan = observations._same_origin_path

    def same_origin_path(value, origin):
        try:
            return scan(value, origin)
        except ValueError:
            return None

    observations._same_origin_path = same_origin_path


_survive_unparsable_urls()


@schemathesis.hook
def before_load_schema(ctx, raw_schema):
    """A run's start or continuation documents a second representation of its answer,
    the run's stream (`text/event-stream`, asked for with `Accept`). schemathesis never
    asks for it, and with it beside the JSON its stateful phase takes no create at all
    (so it follows no link): the stream is left to the SSE tests
    (`tests/e2e/hitl.test.mjs`), as `GET …/stream` is, and the JSON answers are checked
    here exactly as before."""
    answers = list(raw_schema.get("components", {}).get("responses", {}).values())
    for item in raw_schema.get("paths", {}).values():
        for operation in item.values():
            if isinstance(operation, dict):
                answers.extend(operation.get("responses", {}).values())
    for answer in answers:
        if isinstance(answer, dict) and "text/event-stream" in answer.get("content", {}):
            if "application/json" in answer["content"]:
                del answer["content"]["text/event-stream"]
