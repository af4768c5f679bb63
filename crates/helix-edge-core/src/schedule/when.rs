//! When a schedule fires: once `at` a time, `every` so many seconds from its creation, or
//! on a `cron` pattern ([`super::cron`]) read in an IANA time zone ([`super::zone`]) —
//! and the arithmetic of its next fire. Across a daylight-saving change a cron pattern
//! follows the classic rule (Vixie cron's): a pattern of fixed times (`30 2 * * *`) fires
//! once a day — a time that falls in the spring gap fires once, right after the gap; a
//! time the autumn fold repeats fires at its first occurrence only — while a wildcard
//! pattern, whose seconds, minute or hour field starts with `*` (`*/15 * * * *`,
//! `0 * * * *`), fires at every instant whose clock time matches (none in the gap, both
//! passes of the fold).

use super::civil::{DAY, format_rfc3339, parse_rfc3339};
use super::cron::Cron;
use serde::{Deserialize, Serialize};

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
    let ms = parse_rfc3339(value).map_err(|e| WhenError::Time {
        field,
        reason: e.to_string(),
    })?;
    u64::try_from(ms).map_err(|_| WhenError::Time {
        field,
        reason: "before 1970".into(),
    })
}

/// `ms` since the epoch in RFC 3339 (UTC, with milliseconds only when it has them).
pub fn format_time(ms: u64) -> String {
    format_rfc3339(i64::try_from(ms).unwrap_or(i64::MAX / 2))
}

/// A cron pattern in a zone, parsed: both checked before anything is stored.
pub fn parse_cron(pattern: &str, timezone: &str) -> Result<Cron, WhenError> {
    let cron: Cron = pattern
        .parse()
        .map_err(|e: super::cron::CronError| WhenError::Cron(e.to_string()))?;
    if super::zone::offset(timezone, 0).is_none() {
        return Err(WhenError::Zone(timezone.into()));
    }
    Ok(cron)
}

/// The first instant (seconds) after second `after` at which `cron`, read in the zone
/// whose offsets `offset` gives, fires (see the module's rule for daylight saving).
/// Offsets are assumed to change at most once within a day of any time (as every IANA
/// zone does); `None` when the pattern never fires.
pub fn next_cron_fire(cron: &Cron, offset: impl Fn(i64) -> Option<i32>, after: i64) -> Option<i64> {
    let off = |at: i64| offset(at).map(i64::from);
    let start = after + 1;
    // The earliest clock time any instant from `start` on can show: lower after a fold.
    let mut civil = start + off(start)?.min(off(start + DAY)?);
    let mut best: Option<i64> = None;
    // Each step moves to a later clock time the pattern names; the clock times within
    // a day of the first fire settle it.
    for _ in 0..10_000 {
        let Some(named) = cron.next_civil(civil) else {
            break;
        };
        let (before, later) = (off(named - DAY)?, off(named + DAY)?);
        if best.is_some_and(|b| named - before.max(later) > b) {
            break;
        }
        // The instants whose clock shows `named`: none in a gap, two in a fold.
        let mut instants: Vec<i64> = [before, later]
            .into_iter()
            .map(|o| named - o)
            .filter(|&at| off(at) == Some(named - at))
            .collect();
        instants.sort_unstable();
        instants.dedup();
        let fires = match (cron.is_wildcard(), instants.first()) {
            (true, _) => instants,
            (false, Some(&first)) => vec![first],
            // A fixed time in the gap: once, at the gap's end.
            (false, None) => vec![gap_end(&off, named - later, named - before, later)?],
        };
        if let Some(fire) = fires.into_iter().find(|&at| at > after) {
            best = Some(best.map_or(fire, |b| b.min(fire)));
        }
        civil = named + 1;
    }
    best
}

/// The instant in `(from, to]` at which the offset becomes `to_offset` (a gap's end).
fn gap_end(
    off: &impl Fn(i64) -> Option<i64>,
    mut from: i64,
    mut to: i64,
    to_offset: i64,
) -> Option<i64> {
    while to - from > 1 {
        let mid = from + (to - from) / 2;
        if off(mid)? == to_offset {
            to = mid;
        } else {
            from = mid;
        }
    }
    Some(to)
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
                let cron = parse_cron(pattern, timezone).ok()?;
                // Cron fires on whole seconds: after the second `after_ms` is in.
                let second = i64::try_from(after_ms / 1000).ok()?;
                let next = next_cron_fire(&cron, |at| super::zone::offset(timezone, at), second)?;
                u64::try_from(next).ok()?.checked_mul(1000)
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
    fn a_wildcard_pattern_fires_in_both_passes_of_the_fold_and_skips_the_gap() {
        // Every 30 minutes in New York: 01:00-02:00 happens twice on 1 November 2026
        // (EDT, then EST), and 02:00-03:00 not at all on 8 March.
        let when = cron("*/30 * * * *", "America/New_York");
        assert_eq!(
            fires(&when, "2026-11-01T05:10:00Z", 5),
            [
                "2026-11-01T05:30:00Z", // 01:30 EDT
                "2026-11-01T06:00:00Z", // 01:00 EST
                "2026-11-01T06:30:00Z", // 01:30 EST
                "2026-11-01T07:00:00Z", // 02:00 EST
                "2026-11-01T07:30:00Z",
            ]
        );
        assert_eq!(
            fires(&when, "2026-03-08T06:10:00Z", 3),
            [
                "2026-03-08T06:30:00Z", // 01:30 EST
                "2026-03-08T07:00:00Z", // 03:00 EDT: 02:00 and 02:30 do not exist
                "2026-03-08T07:30:00Z",
            ]
        );
        // Hourly: both 01:00s.
        let hourly = cron("0 * * * *", "America/New_York");
        assert_eq!(
            fires(&hourly, "2026-11-01T04:30:00Z", 3),
            [
                "2026-11-01T05:00:00Z",
                "2026-11-01T06:00:00Z",
                "2026-11-01T07:00:00Z"
            ]
        );
    }

    #[test]
    fn a_fixed_time_in_a_fold_months_ahead_fires_at_its_first_occurrence() {
        // Created in February (CET), for 02:30 on 25 October 2026, which Berlin sees
        // first in CEST (00:30Z) and again in CET (01:30Z).
        let when = cron("30 2 25 10 *", "Europe/Berlin");
        assert_eq!(
            fires(&when, "2026-02-01T00:00:00Z", 2),
            ["2026-10-25T00:30:00Z", "2027-10-25T00:30:00Z"]
        );
    }

    #[test]
    fn southern_half_hour_and_rule_changing_zones() {
        // Sydney: AEDT (+11) until 5 April 2026 03:00, then AEST (+10): nine o'clock on
        // the 5th is already AEST.
        let sydney = cron("0 9 * * *", "Australia/Sydney");
        assert_eq!(
            fires(&sydney, "2026-04-03T00:00:00Z", 3),
            [
                "2026-04-03T22:00:00Z",
                "2026-04-04T23:00:00Z",
                "2026-04-05T23:00:00Z"
            ]
        );
        // Lord Howe Island moves its clocks by half an hour: 01:45 on 5 April 2026 is
        // seen twice (+11, then +10:30); a fixed time fires once.
        let lord_howe = cron("45 1 * * *", "Australia/Lord_Howe");
        assert_eq!(
            fires(&lord_howe, "2026-04-04T00:00:00Z", 2),
            ["2026-04-04T14:45:00Z", "2026-04-05T15:15:00Z"]
        );
        // India's offset is +05:30 all year.
        let kolkata = cron("0 9 * * *", "Asia/Kolkata");
        assert_eq!(
            fires(&kolkata, "2026-11-26T00:00:00Z", 1),
            ["2026-11-26T03:30:00Z"]
        );
        // São Paulo kept daylight saving until 2019 and none since: -02:00 in January
        // 2019, -03:00 in January 2020.
        let sao_paulo = cron("0 9 1 1 *", "America/Sao_Paulo");
        assert_eq!(
            fires(&sao_paulo, "2018-12-01T00:00:00Z", 2),
            ["2019-01-01T11:00:00Z", "2020-01-01T12:00:00Z"]
        );
    }

    /// Whether `cron` fires at instant `at` in `zone`, by the module's rule, decided
    /// instant by instant: the oracle the arithmetic is checked against.
    fn fires_at(cron: &Cron, zone: &str, at: i64) -> bool {
        let off = |t: i64| i64::from(super::super::zone::offset(zone, t).unwrap());
        let civil = at + off(at);
        let names = |c: i64| cron.next_civil(c) == Some(c);
        if names(civil) {
            // A fixed time fires at its first occurrence only: not when a fold put the
            // clock back over it (the earlier instant, at the earlier offset).
            let earlier = off(at - DAY);
            let seen = earlier > off(at) && off(civil - earlier) == earlier && civil - earlier < at;
            return cron.is_wildcard() || !seen;
        }
        // At a gap's end: a fixed time that the gap skipped.
        let (before, now) = (off(at - 1), off(at));
        !cron.is_wildcard() && now > before && ((at - 1 + before + 1)..civil).any(names)
    }

    #[test]
    fn next_fires_agree_with_an_instant_by_instant_oracle_around_every_change_of_2026() {
        let zones = [
            "Europe/Berlin",
            "America/New_York",
            "Australia/Sydney",
            "Australia/Lord_Howe",
        ];
        let patterns = [
            "30 2 * * *",
            "*/20 * * * *",
            "0 * * * *",
            "15,45 1-3 * * *",
            "0 2 * * SUN",
        ];
        for zone in zones {
            // The year's changes: where the offset differs from the day before's.
            let year = ms("2026-01-01T00:00:00Z") as i64 / 1000;
            let off = |t: i64| super::super::zone::offset(zone, t).unwrap();
            let changes: Vec<i64> = (0..365)
                .map(|d| year + d * DAY)
                .filter(|&t| off(t) != off(t + DAY))
                .collect();
            assert_eq!(changes.len(), 2, "{zone} changes twice a year");
            for pattern in patterns {
                let when = cron(pattern, zone);
                let parsed = parse_cron(pattern, zone).unwrap();
                for day in changes.iter().copied() {
                    // Minute by minute over the two days around the change.
                    let mut next = when.next_after((day as u64) * 1000).unwrap() as i64 / 1000;
                    for at in (day + 60..day + 2 * DAY).step_by(60) {
                        let expected = fires_at(&parsed, zone, at);
                        assert_eq!(
                            at == next,
                            expected,
                            "{pattern} in {zone} at {}",
                            format_time(at as u64 * 1000)
                        );
                        if at == next {
                            next = when.next_after(next as u64 * 1000).unwrap() as i64 / 1000;
                        }
                    }
                }
            }
        }
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
