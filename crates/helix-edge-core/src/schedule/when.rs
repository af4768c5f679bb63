//! When a schedule fires: once `at` a time, `every` so many seconds from its creation, or
//! on a `cron` pattern read in a time zone — and the arithmetic of its next fire. Cron
//! patterns are croner's (5 fields, or 6 with seconds first; `MON-FRI`, `L`, `#` and the
//! rest of OCPS), time zones jiff's, with the IANA database built in so that every target
//! computes the same fires. Across a daylight-saving change a cron fire follows croner's
//! rules: a fixed time that falls in the spring gap fires once, right after it; a fixed
//! time repeated in the autumn fold fires once, at its first occurrence; interval fields
//! (`*/15`) fire at every instant that matches.

use croner::Cron;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// The shortest `every`: one second.
pub const MIN_EVERY_SECS: u64 = 1;
/// The longest `every`: a year.
pub const MAX_EVERY_SECS: u64 = 366 * 24 * 3600;

/// When a schedule fires, as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum When {
    /// Once, at this time (ms since the epoch).
    At {
        /// When.
        at_ms: u64,
    },
    /// Every `secs` seconds, counted from `from_ms` (the schedule's creation).
    Every {
        /// The interval.
        secs: u64,
        /// Where the count starts.
        from_ms: u64,
    },
    /// On a cron pattern read in an IANA time zone.
    Cron {
        /// The pattern, as given.
        pattern: String,
        /// The zone's IANA name (`UTC` when none was given).
        timezone: String,
    },
}

/// Why a schedule's timing is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WhenError {
    /// Not an RFC 3339 time.
    #[error("{field}: not an RFC 3339 time with an offset ({reason})")]
    Time {
        /// The field.
        field: &'static str,
        /// What the parser said.
        reason: String,
    },
    /// A cron pattern that does not parse.
    #[error("cron: {0}")]
    Cron(String),
    /// A zone the database does not have.
    #[error("timezone: no time zone named {0:?} (IANA names, like Europe/Berlin)")]
    Zone(String),
    /// A pattern that never matches (the 30th of February).
    #[error("cron: {0:?} never fires")]
    Never(String),
}

/// `value` (RFC 3339, with an offset) in ms since the epoch; `field` names it in errors.
pub fn parse_time(field: &'static str, value: &str) -> Result<u64, WhenError> {
    let time = Timestamp::from_str(value).map_err(|e| WhenError::Time {
        field,
        reason: e.to_string(),
    })?;
    u64::try_from(time.as_millisecond()).map_err(|_| WhenError::Time {
        field,
        reason: "before 1970".into(),
    })
}

/// `ms` since the epoch in RFC 3339 (UTC, with milliseconds only when it has them).
pub fn format_time(ms: u64) -> String {
    let ms = i64::try_from(ms).unwrap_or(i64::MAX);
    match Timestamp::from_millisecond(ms) {
        Ok(time) => time.to_string(),
        Err(_) => Timestamp::MAX.to_string(),
    }
}

/// A cron pattern in a zone, parsed: both checked before anything is stored.
pub fn parse_cron(pattern: &str, timezone: &str) -> Result<(Cron, TimeZone), WhenError> {
    let cron = Cron::from_str(pattern).map_err(|e| WhenError::Cron(e.to_string()))?;
    let zone = TimeZone::get(timezone).map_err(|_| WhenError::Zone(timezone.into()))?;
    Ok((cron, zone))
}

impl When {
    /// The first fire strictly after `after_ms` (ms since the epoch), if there is one.
    /// A stored cron pattern or zone that no longer parses has none.
    pub fn next_after(&self, after_ms: u64) -> Option<u64> {
        match self {
            Self::At { at_ms } => (*at_ms > after_ms).then_some(*at_ms),
            Self::Every { secs, from_ms } => {
                let every = secs.saturating_mul(1000).max(1);
                let ticks = after_ms.saturating_sub(*from_ms) / every + 1;
                from_ms.checked_add(ticks.checked_mul(every)?)
            }
            Self::Cron { pattern, timezone } => {
                let (cron, zone) = parse_cron(pattern, timezone).ok()?;
                // croner counts whole seconds: start from the second `after_ms` is in.
                let second = i64::try_from(after_ms / 1000).ok()?;
                let start = Timestamp::from_second(second).ok()?.to_zoned(zone);
                let next = cron.find_next_occurrence(&start, false).ok()?;
                u64::try_from(next.timestamp().as_millisecond()).ok()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(rfc3339: &str) -> u64 {
        parse_time("t", rfc3339).unwrap()
    }

    fn cron(pattern: &str, timezone: &str) -> When {
        parse_cron(pattern, timezone).unwrap();
        When::Cron {
            pattern: pattern.into(),
            timezone: timezone.into(),
        }
    }

    /// The first `n` fires after `from`, in RFC 3339.
    fn fires(when: &When, from: &str, n: usize) -> Vec<String> {
        let mut at = ms(from);
        (0..n)
            .map(|_| {
                at = when.next_after(at).unwrap();
                format_time(at)
            })
            .collect()
    }

    #[test]
    fn at_fires_once_and_only_after_now() {
        let when = When::At {
            at_ms: ms("2026-11-26T09:00:00Z"),
        };
        assert_eq!(
            when.next_after(ms("2026-11-26T08:59:59.999Z")),
            Some(ms("2026-11-26T09:00:00Z"))
        );
        assert_eq!(when.next_after(ms("2026-11-26T09:00:00Z")), None);
    }

    #[test]
    fn every_counts_from_its_creation_and_skips_the_ticks_that_passed() {
        let from = ms("2026-11-26T09:00:00Z");
        let when = When::Every {
            secs: 2,
            from_ms: from,
        };
        assert_eq!(when.next_after(from), Some(from + 2000));
        assert_eq!(when.next_after(from + 1999), Some(from + 2000));
        assert_eq!(when.next_after(from + 2000), Some(from + 4000));
        // Asleep for a minute: the next fire is the next tick, not the 30 it missed.
        assert_eq!(when.next_after(from + 60_500), Some(from + 62_000));
    }

    #[test]
    fn cron_fires_on_weekdays_at_nine_in_berlin_across_both_dst_changes() {
        let when = cron("0 9 * * MON-FRI", "Europe/Berlin");
        // Friday 27 March 2026, then Monday 30 March: CET (+1) became CEST (+2) on the 29th.
        assert_eq!(
            fires(&when, "2026-03-27T00:00:00Z", 2),
            ["2026-03-27T08:00:00Z", "2026-03-30T07:00:00Z"]
        );
        // Friday 23 October 2026, then Monday 26 October: back to CET on the 25th.
        assert_eq!(
            fires(&when, "2026-10-23T00:00:00Z", 2),
            ["2026-10-23T07:00:00Z", "2026-10-26T08:00:00Z"]
        );
    }

    #[test]
    fn a_fixed_time_in_the_spring_gap_fires_once_and_one_in_the_autumn_fold_once() {
        // 02:30 does not exist in New York on 8 March 2026 (02:00 became 03:00) …
        let spring = fires(
            &cron("30 2 * * *", "America/New_York"),
            "2026-03-07T12:00:00Z",
            2,
        );
        assert_eq!(
            spring[0], "2026-03-08T07:00:00Z",
            "right after the gap, once"
        );
        assert_eq!(spring[1], "2026-03-09T06:30:00Z");
        // … and 01:30 exists twice on 1 November (02:00 went back to 01:00).
        let autumn = fires(
            &cron("30 1 * * *", "America/New_York"),
            "2026-10-31T12:00:00Z",
            2,
        );
        assert_eq!(
            autumn,
            ["2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"],
            "the first of the two 01:30s only"
        );
    }

    #[test]
    fn seconds_patterns_fire_on_the_next_whole_matching_second() {
        let when = cron("*/2 * * * * *", "UTC");
        assert_eq!(
            fires(&when, "2026-11-26T09:00:00.500Z", 3),
            [
                "2026-11-26T09:00:02Z",
                "2026-11-26T09:00:04Z",
                "2026-11-26T09:00:06Z"
            ]
        );
    }

    #[test]
    fn bad_patterns_zones_and_times_are_refused_with_what_is_wrong() {
        assert!(matches!(
            parse_cron("61 * * * *", "UTC"),
            Err(WhenError::Cron(_))
        ));
        assert!(matches!(
            parse_cron("not cron", "UTC"),
            Err(WhenError::Cron(_))
        ));
        assert_eq!(
            parse_cron("0 9 * * *", "Mars/Olympus").err(),
            Some(WhenError::Zone("Mars/Olympus".into()))
        );
        let err = parse_time("at", "tomorrow at nine").unwrap_err();
        assert!(
            err.to_string().starts_with("at: not an RFC 3339 time"),
            "{err}"
        );
        assert!(
            parse_time("at", "2026-11-26T09:00:00").is_err(),
            "no offset"
        );
        assert_eq!(
            ms("2026-11-26T10:00:00+01:00"),
            ms("2026-11-26T09:00:00Z"),
            "an offset is honoured"
        );
    }
}
