//! A schedule as the API takes it (`POST /v1/sessions/{id}/schedules`), checked into the
//! record the session keeps, and as `GET …/schedules` shows it.

use super::busy::WhenBusy;
use super::when::parse_time;
use super::when::{MAX_EVERY_SECS, MIN_EVERY_SECS, When, WhenError, format_time, parse_cron};
use crate::api::{ApiError, RichInput, UserInput};
use crate::attachment::Attachment;
use crate::message::Message;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Schedules a session holds at most; one more is refused (429 `too_many_schedules`).
pub const MAX_SCHEDULES: usize = 20;
/// The most fires a `count` may ask for.
pub const MAX_COUNT: u64 = 1_000_000;

/// A schedule, as the session keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Schedule {
    /// Its id (`schedule_…`).
    pub schedule_id: String,
    /// When it fires.
    pub when: When,
    /// The user messages each fire's run starts with.
    pub messages: Vec<Message>,
    /// No fire after this (ms), if set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until_ms: Option<u64>,
    /// Fires in all, if limited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub count: Option<u64>,
    /// What a fire does while the session is busy; `None`: the agent's policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub when_busy: Option<WhenBusy>,
    /// Fires so far (runs started or queued).
    pub fired: u64,
    /// Fires skipped because the session was busy (`reject`) or its queue full.
    #[serde(default)]
    pub skipped: u64,
    /// When it fires next (ms).
    pub next_fire_ms: u64,
    /// When it was created (ms).
    pub created_at: u64,
}

impl Schedule {
    /// The fire after the one due at `due_ms`, counted once at `now_ms`: fires missed
    /// while nothing ran are not made up (the next is the first after `now_ms`). `None`
    /// when the schedule is spent.
    pub fn following(&self, now_ms: u64) -> Option<u64> {
        let spent = self
            .count
            .is_some_and(|count| self.fired + self.skipped >= count);
        let next = self.when.next_after(now_ms.max(self.next_fire_ms))?;
        (!spent && self.until_ms.is_none_or(|until| next <= until)).then_some(next)
    }
}

/// Body of `POST …/schedules`: one of `at`, `every` and `cron` (with `timezone`), the
/// message as on `POST …/messages`, and optional `until`, `count` and `whenBusy`.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct ScheduleBody {
    #[serde(default)]
    at: Option<String>,
    #[serde(default)]
    every: Option<f64>,
    #[serde(default)]
    cron: Option<String>,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    until: Option<String>,
    #[serde(default)]
    count: Option<f64>,
    #[serde(default)]
    when_busy: Option<WhenBusy>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    metadata: Option<Map<String, Value>>,
    #[serde(default)]
    attachments: Vec<Attachment>,
    #[serde(default)]
    messages: Option<Vec<UserInput>>,
}

/// `value` of `field` as a whole number from `min` to `max` (JSON's `5.0` is `5`).
fn whole(field: &str, value: f64, min: u64, max: u64) -> Result<u64, ApiError> {
    let fits = value.fract() == 0.0 && value >= min as f64 && value <= max as f64;
    if fits {
        return Ok(value as u64);
    }
    let message = format!("{field}: a whole number from {min} to {max}, got {value}.");
    Err(ApiError::validation(message))
}

fn invalid(e: WhenError) -> ApiError {
    ApiError::validation(format!("{e}."))
}

impl ScheduleBody {
    /// The schedule it asks for, checked at `now_ms`, with id `schedule_id`.
    pub fn into_schedule(self, schedule_id: String, now_ms: u64) -> Result<Schedule, ApiError> {
        let when = match (self.at, self.every, self.cron) {
            (Some(at), None, None) => {
                let at_ms = parse_time("at", &at).map_err(invalid)?;
                if at_ms <= now_ms {
                    return Err(ApiError::validation(format!("at: {at} has passed.")));
                }
                When::At { at_ms }
            }
            (None, Some(secs), None) => When::Every {
                secs: whole("every", secs, MIN_EVERY_SECS, MAX_EVERY_SECS)?,
                from_ms: now_ms,
            },
            (None, None, Some(pattern)) => {
                let timezone = self.timezone.clone().unwrap_or_else(|| "UTC".into());
                parse_cron(&pattern, &timezone).map_err(invalid)?;
                When::Cron { pattern, timezone }
            }
            _ => {
                return Err(ApiError::validation(
                    "A schedule has exactly one of at, every and cron.",
                ));
            }
        };
        if self.timezone.is_some() && !matches!(when, When::Cron { .. }) {
            return Err(ApiError::validation("timezone: only with cron."));
        }
        let until_ms = match self.until {
            Some(until) => Some(parse_time("until", &until).map_err(invalid)?),
            None => None,
        };
        let count = match self.count {
            Some(n) => Some(whole("count", n, 1, MAX_COUNT)?),
            None => None,
        };
        let input = RichInput {
            message: self.message,
            metadata: self.metadata,
            attachments: self.attachments,
            messages: self.messages,
        };
        let messages = input.into_messages("body")?;
        let next_fire_ms = when.next_after(now_ms).ok_or_else(|| match &when {
            When::Cron { pattern, .. } => invalid(WhenError::Never(pattern.clone())),
            _ => ApiError::validation("The schedule never fires."),
        })?;
        if until_ms.is_some_and(|until| until < next_fire_ms) {
            return Err(ApiError::validation(format!(
                "until: before the first fire ({}).",
                format_time(next_fire_ms)
            )));
        }
        Ok(Schedule {
            schedule_id,
            when,
            messages,
            until_ms,
            count,
            when_busy: self.when_busy,
            fired: 0,
            skipped: 0,
            next_fire_ms,
            created_at: now_ms,
        })
    }
}

/// A schedule as `GET …/schedules` lists it (times in RFC 3339).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ScheduleView {
    schedule_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    every: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cron: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timezone: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    until: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    count: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    when_busy: Option<WhenBusy>,
    fired: u64,
    skipped: u64,
    next_fire_at: String,
    created_at: String,
    messages: Vec<Message>,
}

impl From<Schedule> for ScheduleView {
    fn from(s: Schedule) -> Self {
        let (mut at, mut every, mut cron, mut timezone) = (None, None, None, None);
        match s.when {
            When::At { at_ms } => at = Some(format_time(at_ms)),
            When::Every { secs, .. } => every = Some(secs),
            When::Cron {
                pattern,
                timezone: zone,
            } => (cron, timezone) = (Some(pattern), Some(zone)),
        }
        Self {
            schedule_id: s.schedule_id,
            at,
            every,
            cron,
            timezone,
            until: s.until_ms.map(format_time),
            count: s.count,
            when_busy: s.when_busy,
            fired: s.fired,
            skipped: s.skipped,
            next_fire_at: format_time(s.next_fire_ms),
            created_at: format_time(s.created_at),
            messages: s.messages,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const NOW: u64 = 1_795_683_600_000; // 2026-11-26T09:00:00Z

    fn schedule(body: Value) -> Result<Schedule, ApiError> {
        let body: ScheduleBody =
            serde_json::from_value(body).map_err(|e| ApiError::validation(e.to_string()))?;
        body.into_schedule("schedule_1".into(), NOW)
    }

    fn refused(body: Value) -> String {
        let err = schedule(body).unwrap_err();
        assert_eq!(err.status, 400, "{err:?}");
        err.message
    }

    #[test]
    fn each_kind_of_schedule_is_checked_and_gets_its_first_fire() {
        let at = schedule(json!({"at": "2026-11-27T09:00:00+01:00", "message": "hi"})).unwrap();
        assert_eq!(at.next_fire_ms, NOW + 24 * 3600 * 1000 - 3600 * 1000);
        let every = schedule(json!({"every": 2, "message": "tick", "count": 3})).unwrap();
        assert_eq!((every.next_fire_ms, every.count), (NOW + 2000, Some(3)));
        let cron = schedule(json!({
            "cron": "0 9 * * MON-FRI", "timezone": "Europe/Berlin",
            "messages": [{"message": "standup"}], "whenBusy": "enqueue"
        }))
        .unwrap();
        // Thursday 09:00 UTC is 10:00 in Berlin: the next is Friday 08:00 UTC.
        assert_eq!(format_time(cron.next_fire_ms), "2026-11-27T08:00:00Z");
        assert_eq!(cron.when_busy, Some(WhenBusy::Enqueue));
        let view = serde_json::to_value(ScheduleView::from(cron)).unwrap();
        assert_eq!(view["cron"], "0 9 * * MON-FRI");
        assert_eq!(view["nextFireAt"], "2026-11-27T08:00:00Z");
        assert_eq!(view["messages"][0]["content"], "standup");
    }

    #[test]
    fn every_bad_input_is_refused_with_what_is_wrong() {
        assert!(refused(json!({"message": "x"})).contains("exactly one of at, every and cron"));
        assert!(
            refused(json!({"at": "2026-11-27T09:00:00Z", "every": 5, "message": "x"}))
                .contains("exactly one")
        );
        assert!(
            refused(json!({"at": "2026-11-26T08:59:59Z", "message": "x"})).contains("has passed")
        );
        assert!(
            refused(json!({"every": -1, "message": "x"})).contains("every: a whole number from 1")
        );
        assert!(refused(json!({"every": 2.5, "message": "x"})).contains("every"));
        assert_eq!(
            schedule(json!({"every": 5.0, "count": 2.0, "message": "x"}))
                .unwrap()
                .count,
            Some(2)
        );
        assert!(refused(json!({"every": 0, "message": "x"})).contains("every"));
        assert!(refused(json!({"cron": "99 * * * *", "message": "x"})).starts_with("cron:"));
        assert!(refused(json!({"cron": "0 9 30 2 *", "message": "x"})).contains("never fires"));
        assert!(
            refused(json!({"cron": "0 9 * * *", "timezone": "Nowhere/Land", "message": "x"}))
                .contains("no time zone named \"Nowhere/Land\"")
        );
        assert!(
            refused(json!({"every": 5, "timezone": "UTC", "message": "x"}))
                .contains("only with cron")
        );
        assert!(refused(json!({"every": 5, "count": 0, "message": "x"})).contains("count"));
        assert!(
            refused(json!({"every": 60, "until": "2026-11-26T09:00:30Z", "message": "x"}))
                .contains("before the first fire")
        );
        assert!(refused(json!({"every": 5})).contains("exactly one of message and messages"));
        assert!(
            refused(json!({"every": 5, "message": "x", "whenBusy": "later"}))
                .contains("unknown variant")
        );
        assert!(refused(json!({"every": 5, "message": "x", "extra": 1})).contains("unknown field"));
    }

    #[test]
    fn a_spent_schedule_has_no_following_fire_and_missed_fires_are_not_made_up() {
        let mut every = schedule(json!({"every": 10, "message": "x", "count": 2})).unwrap();
        every.fired = 1;
        // Woken 35 s late: the next fire is the next tick after now, not the three missed.
        assert_eq!(every.following(NOW + 45_000), Some(NOW + 50_000));
        every.fired = 2;
        assert_eq!(every.following(NOW + 45_000), None, "count reached");
        let mut until = schedule(json!({
            "every": 10, "message": "x", "until": "2026-11-26T09:00:25Z"
        }))
        .unwrap();
        assert_eq!(until.following(NOW + 10_000), Some(NOW + 20_000));
        until.next_fire_ms = NOW + 20_000;
        assert_eq!(until.following(NOW + 20_000), None, "past until");
        let at = schedule(json!({"at": "2026-11-27T09:00:00Z", "message": "x"})).unwrap();
        assert_eq!(at.following(at.next_fire_ms), None, "once");
    }
}
