//! Cron patterns, parsed and matched against civil times (no zone: [`super::when`] maps
//! civil times to instants). The classic five fields — minute, hour, day of month,
//! month, day of week — or six with seconds first, each a list of `*`, `n`, `a-b`, with
//! an optional `/step`; month and weekday names (`JAN`, `MON-FRI`; 0 and 7 are Sunday);
//! `?` for "any" in the day fields; `L` (the month's last day), `15W` (the weekday
//! nearest the 15th), `LW` (the last weekday), `5L` (the last Friday) and `1#2` (the
//! second Monday); and the aliases `@yearly`, `@annually`, `@monthly`, `@weekly`,
//! `@daily`, `@midnight` and `@hourly`. When both day fields are restricted a day
//! matches either (as in Vixie cron); otherwise both.

use super::civil::{Civil, days_from_civil, days_in_month, weekday};

/// Years a search looks ahead before it concludes a pattern never fires (the weekday
/// of a date repeats every 400 years).
const HORIZON_YEARS: i64 = 400;

/// Why a pattern is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct CronError(String);

/// A parsed cron pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cron {
    seconds: u64,
    minutes: u64,
    hours: u64,
    months: u64,
    days: Days,
    weekdays: Weekdays,
    /// Both day fields are restricted: a day matches either.
    either_day: bool,
    /// The seconds, minute or hour field starts with `*`: the pattern names moments
    /// of the clock as it runs, not fixed times of the day (see [`Cron::is_wildcard`]).
    wildcard: bool,
}

/// The day-of-month field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Days {
    /// Days 1–31 as bits.
    mask: u64,
    /// `L`: the month's last day.
    last: bool,
    /// `LW`: the month's last weekday.
    last_weekday: bool,
    /// `nW`: the weekday nearest each of these days.
    nearest_weekday: Vec<u32>,
}

/// The day-of-week field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Weekdays {
    /// Weekdays 0 (Sunday) – 6 as bits.
    mask: u64,
    /// `nL`: the last of these weekdays in the month, as bits.
    last: u64,
    /// `n#k`: the k-th (1–5) weekday n of the month.
    nth: Vec<(u32, u32)>,
}

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One field's place and range.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
    /// The names of its values, from `min` on.
    names: &'static [&'static str],
}

const SECOND: Field = Field {
    name: "second",
    min: 0,
    max: 59,
    names: &[],
};
const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
    names: &[],
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
    names: &[],
};
const DAY: Field = Field {
    name: "day of month",
    min: 1,
    max: 31,
    names: &[],
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
    names: &MONTHS,
};
// 7 is Sunday too.
const WEEKDAY: Field = Field {
    name: "day of week",
    min: 0,
    max: 7,
    names: &WEEKDAYS,
};

impl Field {
    fn error(&self, what: impl std::fmt::Display) -> CronError {
        CronError(format!("{} field: {what}", self.name))
    }

    /// One value: a number in range or a name.
    fn value(&self, text: &str) -> Result<u32, CronError> {
        let upper = text.to_ascii_uppercase();
        if let Some(at) = self.names.iter().position(|n| *n == upper) {
            return Ok(self.min + at as u32);
        }
        let n: u32 = text.parse().map_err(|_| {
            self.error(format!(
                "{text:?} is not a number{}",
                if self.names.is_empty() {
                    ""
                } else {
                    " or a name"
                }
            ))
        })?;
        if n < self.min || n > self.max {
            return Err(self.error(format!("{n} is out of range {}-{}", self.min, self.max)));
        }
        Ok(n)
    }

    /// The values of one comma-separated part (`*`, `n`, `a-b`, each with an optional
    /// `/step`) as bits.
    fn part(&self, part: &str) -> Result<u64, CronError> {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => {
                let step: u32 =
                    step.parse().ok().filter(|s| *s > 0).ok_or_else(|| {
                        self.error(format!("step {step:?} is not a positive number"))
                    })?;
                (range, step)
            }
            None => (part, 1),
        };
        let (from, to) = match range {
            "*" | "?" => (self.min, self.max),
            _ => match range.split_once('-') {
                Some((a, b)) => (self.value(a)?, self.value(b)?),
                // `a/n`: from a to the end of the range.
                None if part.contains('/') => (self.value(range)?, self.max),
                None => {
                    let v = self.value(range)?;
                    (v, v)
                }
            },
        };
        if from > to {
            return Err(self.error(format!("the range {range} runs backwards")));
        }
        Ok((from..=to)
            .step_by(step as usize)
            .fold(0, |bits, v| bits | 1 << v))
    }

    /// A whole field of plain parts as bits.
    fn parse(&self, text: &str) -> Result<u64, CronError> {
        text.split(',')
            .try_fold(0, |bits, part| Ok(bits | self.part(part)?))
    }
}

/// Whether a field is restricted (not `*` or `?`, with no step).
fn restricted(field: &str) -> bool {
    !matches!(field, "*" | "?")
}

fn days(text: &str) -> Result<Days, CronError> {
    let mut days = Days::default();
    for part in text.split(',') {
        let upper = part.to_ascii_uppercase();
        match upper.as_str() {
            "L" => days.last = true,
            "LW" => days.last_weekday = true,
            _ if upper.ends_with('W') => {
                let day = DAY.value(&upper[..upper.len() - 1])?;
                days.nearest_weekday.push(day);
            }
            _ => days.mask |= DAY.part(part)?,
        }
    }
    Ok(days)
}

fn weekdays(text: &str) -> Result<Weekdays, CronError> {
    let mut weekdays = Weekdays::default();
    // 7 is Sunday.
    let day = |v: u32| v % 7;
    for part in text.split(',') {
        let upper = part.to_ascii_uppercase();
        if let Some((wd, nth)) = upper.split_once('#') {
            let n: u32 = nth
                .parse()
                .ok()
                .filter(|n| (1..=5).contains(n))
                .ok_or_else(|| WEEKDAY.error(format!("#{nth}: the week is 1 to 5")))?;
            weekdays.nth.push((day(WEEKDAY.value(wd)?), n));
        } else if upper.len() > 1 && upper.ends_with('L') {
            weekdays.last |= 1 << day(WEEKDAY.value(&upper[..upper.len() - 1])?);
        } else {
            let bits = WEEKDAY.part(part)?;
            weekdays.mask |= (bits & 0x7f) | (bits >> 7 & 1);
        }
    }
    Ok(weekdays)
}

/// The smallest bit of `mask` at `from` or above.
fn next_bit(mask: u64, from: u32) -> Option<u32> {
    if from >= 64 {
        return None;
    }
    let rest = mask >> from;
    (rest != 0).then(|| from + rest.trailing_zeros())
}

impl std::str::FromStr for Cron {
    type Err = CronError;

    fn from_str(pattern: &str) -> Result<Self, CronError> {
        let expanded = match pattern.trim().to_ascii_lowercase().as_str() {
            "@yearly" | "@annually" => "0 0 1 1 *",
            "@monthly" => "0 0 1 * *",
            "@weekly" => "0 0 * * 0",
            "@daily" | "@midnight" => "0 0 * * *",
            "@hourly" => "0 * * * *",
            other if other.starts_with('@') => {
                return Err(CronError(format!("unknown alias {:?}", pattern.trim())));
            }
            _ => pattern,
        };
        let fields: Vec<&str> = expanded.split_whitespace().collect();
        let (seconds, rest) = match fields.len() {
            5 => ("0", &fields[..]),
            6 => (fields[0], &fields[1..]),
            n => {
                return Err(CronError(format!(
                    "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), found {n}"
                )));
            }
        };
        let [minute, hour, day, month, weekday] = [rest[0], rest[1], rest[2], rest[3], rest[4]];
        Ok(Self {
            seconds: SECOND.parse(seconds)?,
            minutes: MINUTE.parse(minute)?,
            hours: HOUR.parse(hour)?,
            months: MONTH.parse(month)?,
            days: days(day)?,
            weekdays: weekdays(weekday)?,
            either_day: restricted(day) && restricted(weekday),
            wildcard: [seconds, minute, hour].iter().any(|f| f.starts_with('*')),
        })
    }
}

impl Cron {
    /// Whether the pattern names moments of the running clock (its seconds, minute or
    /// hour field starts with `*`: `*/15 * * * *`, `0 * * * *`) rather than fixed times
    /// of the day (`30 2 * * *`). Across a daylight-saving change the first fire at
    /// every instant that matches; a fixed time fires once a day (see `super::when`).
    pub fn is_wildcard(&self) -> bool {
        self.wildcard
    }

    /// Whether the date `year-month-day` matches the day fields and the month.
    fn date_matches(&self, year: i64, month: u32, day: u32) -> bool {
        if self.months >> month & 1 == 0 {
            return false;
        }
        let last = days_in_month(year, month);
        let wd = weekday(days_from_civil(year, month, day));
        let is_weekday = (1..=5).contains(&wd);
        let d = &self.days;
        let nearest = |target: u32| {
            let target = target.min(last);
            let wd = weekday(days_from_civil(year, month, target));
            match wd {
                // Saturday: the Friday before, unless that is last month.
                6 if target == 1 => target + 2,
                6 => target - 1,
                // Sunday: the Monday after, unless that is next month.
                0 if target == last => target - 2,
                0 => target + 1,
                _ => target,
            }
        };
        let day_match = d.mask >> day & 1 == 1
            || (d.last && day == last)
            || (d.last_weekday
                && is_weekday
                && (day + 1..=last)
                    .all(|later| !(1..=5).contains(&weekday(days_from_civil(year, month, later)))))
            || d.nearest_weekday.iter().any(|&t| nearest(t) == day);
        let w = &self.weekdays;
        let weekday_match = w.mask >> wd & 1 == 1
            || (w.last >> wd & 1 == 1 && day + 7 > last)
            || w.nth
                .iter()
                .any(|&(nwd, n)| nwd == wd && (day - 1) / 7 + 1 == n);
        if self.either_day {
            day_match || weekday_match
        } else {
            day_match && weekday_match
        }
    }

    /// The first time of day at or after `h:m:s` the pattern names.
    fn time_at_or_after(&self, h: u32, m: u32, s: u32) -> Option<(u32, u32, u32)> {
        let mut hour = next_bit(self.hours, h)?;
        loop {
            let (m0, s0) = if hour == h { (m, s) } else { (0, 0) };
            let mut minute = next_bit(self.minutes, m0);
            while let Some(min) = minute {
                let from = if hour == h && min == m { s0 } else { 0 };
                if let Some(second) = next_bit(self.seconds, from) {
                    return Some((hour, min, second));
                }
                minute = next_bit(self.minutes, min + 1);
            }
            hour = next_bit(self.hours, hour + 1)?;
        }
    }

    /// The first civil time at or after `from` (seconds from 1970-01-01T00:00:00 of the
    /// clock the pattern is read in) that the pattern names; `None` if it names none in
    /// the next 400 years (`0 9 30 2 *`).
    pub fn next_civil(&self, from: i64) -> Option<i64> {
        let start = Civil::from_secs(from);
        let (mut year, mut month, mut day) = (start.year, start.month, start.day);
        let mut time = (start.hour, start.minute, start.second);
        while year <= start.year + HORIZON_YEARS {
            if self.months >> month & 1 == 1 && day <= days_in_month(year, month) {
                let time = match self.date_matches(year, month, day) {
                    true => self.time_at_or_after(time.0, time.1, time.2),
                    false => None,
                };
                if let Some((hour, minute, second)) = time {
                    let found = Civil {
                        year,
                        month,
                        day,
                        hour,
                        minute,
                        second,
                    };
                    return Some(found.to_secs());
                }
                day += 1;
            } else {
                // The rest of a month that is not in the pattern.
                day = 32;
            }
            time = (0, 0, 0);
            if day > days_in_month(year, month) {
                day = 1;
                month += 1;
                if month > 12 {
                    month = 1;
                    year += 1;
                }
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::civil::parse_rfc3339;
    use super::*;

    fn secs(text: &str) -> i64 {
        parse_rfc3339(text).unwrap() / 1000
    }

    /// The first `n` civil times the pattern names from `from`, as `…Z` strings (civil
    /// times read as if in UTC).
    fn names(pattern: &str, from: &str, n: usize) -> Vec<String> {
        let cron: Cron = pattern.parse().unwrap();
        let mut at = secs(from);
        (0..n)
            .map(|_| {
                let found = cron.next_civil(at).unwrap();
                at = found + 1;
                super::super::civil::format_rfc3339(found * 1000)
            })
            .collect()
    }

    #[test]
    fn five_and_six_fields_with_lists_ranges_steps_and_names() {
        assert_eq!(
            names("0 9 * * MON-FRI", "2026-11-27T10:00:00Z", 2),
            ["2026-11-30T09:00:00Z", "2026-12-01T09:00:00Z"],
            "Friday after nine, then Monday and Tuesday"
        );
        assert_eq!(
            names("*/20 9-10 * * *", "2026-11-27T09:30:00Z", 4),
            [
                "2026-11-27T09:40:00Z",
                "2026-11-27T10:00:00Z",
                "2026-11-27T10:20:00Z",
                "2026-11-27T10:40:00Z"
            ]
        );
        assert_eq!(
            names("15,45 */2 1 jan,Jul *", "2026-06-01T00:00:00Z", 3),
            [
                "2026-07-01T00:15:00Z",
                "2026-07-01T00:45:00Z",
                "2026-07-01T02:15:00Z"
            ]
        );
        assert_eq!(
            names("*/2 * * * * *", "2026-11-26T09:00:01Z", 2),
            ["2026-11-26T09:00:02Z", "2026-11-26T09:00:04Z"]
        );
        assert_eq!(
            names("5/20 * * * *", "2026-11-26T09:00:00Z", 3)[2],
            "2026-11-26T09:45:00Z"
        );
        assert_eq!(
            names("0 0 * * 7", "2026-11-26T00:00:00Z", 1),
            ["2026-11-29T00:00:00Z"],
            "7 is Sunday"
        );
    }

    #[test]
    fn the_day_fields_match_either_when_both_are_restricted() {
        // The 1st of the month or any Monday.
        assert_eq!(
            names("0 0 1 * MON", "2026-11-27T00:00:00Z", 3),
            [
                "2026-11-30T00:00:00Z",
                "2026-12-01T00:00:00Z",
                "2026-12-07T00:00:00Z"
            ]
        );
        // With `?`, only the weekdays count.
        assert_eq!(
            names("0 0 ? * MON", "2026-11-27T00:00:00Z", 2)[1],
            "2026-12-07T00:00:00Z"
        );
    }

    #[test]
    fn last_nearest_and_nth_days() {
        assert_eq!(
            names("0 0 L * *", "2028-02-01T00:00:00Z", 2),
            ["2028-02-29T00:00:00Z", "2028-03-31T00:00:00Z"]
        );
        // 15 Nov 2026 is a Sunday: its nearest weekday is Monday the 16th; 1 Aug 2026 a
        // Saturday: Monday the 3rd (not July's Friday).
        assert_eq!(
            names("0 0 15W * *", "2026-11-01T00:00:00Z", 1),
            ["2026-11-16T00:00:00Z"]
        );
        assert_eq!(
            names("0 0 1W * *", "2026-07-02T00:00:00Z", 1),
            ["2026-08-03T00:00:00Z"]
        );
        // The last weekday of January 2027: Friday the 29th.
        assert_eq!(
            names("0 0 LW * *", "2027-01-01T00:00:00Z", 1),
            ["2027-01-29T00:00:00Z"]
        );
        assert_eq!(
            names("0 0 * * 5L", "2026-11-01T00:00:00Z", 1),
            ["2026-11-27T00:00:00Z"],
            "last Friday"
        );
        assert_eq!(
            names("0 0 * * MON#2", "2026-11-01T00:00:00Z", 1),
            ["2026-11-09T00:00:00Z"],
            "second Monday"
        );
    }

    #[test]
    fn aliases() {
        assert_eq!(
            names("@yearly", "2026-11-26T00:00:00Z", 1),
            ["2027-01-01T00:00:00Z"]
        );
        assert_eq!(
            names("@weekly", "2026-11-26T00:00:00Z", 1),
            ["2026-11-29T00:00:00Z"]
        );
        assert_eq!(
            names("@hourly", "2026-11-26T09:00:01Z", 1),
            ["2026-11-26T10:00:00Z"]
        );
        assert!("@daily".parse::<Cron>().is_ok_and(|c| !c.is_wildcard()));
        assert!("@hourly".parse::<Cron>().is_ok_and(|c| c.is_wildcard()));
    }

    #[test]
    fn a_pattern_that_never_matches_has_no_next_time() {
        let feb30: Cron = "0 9 30 2 *".parse().unwrap();
        assert_eq!(feb30.next_civil(secs("2026-01-01T00:00:00Z")), None);
        let feb29: Cron = "0 9 29 2 *".parse().unwrap();
        let next = feb29.next_civil(secs("2026-01-01T00:00:00Z")).unwrap();
        assert_eq!(
            super::super::civil::format_rfc3339(next * 1000),
            "2028-02-29T09:00:00Z"
        );
    }

    #[test]
    fn malformed_patterns_say_which_field_and_why() {
        let err = |p: &str| p.parse::<Cron>().unwrap_err().to_string();
        assert_eq!(err("61 * * * *"), "minute field: 61 is out of range 0-59");
        assert_eq!(err("* 24 * * *"), "hour field: 24 is out of range 0-23");
        assert_eq!(
            err("* * 0 * *"),
            "day of month field: 0 is out of range 1-31"
        );
        assert_eq!(
            err("* * * FOO *"),
            "month field: \"FOO\" is not a number or a name"
        );
        assert_eq!(err("* * * * 8"), "day of week field: 8 is out of range 0-7");
        assert_eq!(
            err("*/0 * * * *"),
            "minute field: step \"0\" is not a positive number"
        );
        assert_eq!(
            err("5-1 * * * *"),
            "minute field: the range 5-1 runs backwards"
        );
        assert_eq!(
            err("* * * * MON#6"),
            "day of week field: #6: the week is 1 to 5"
        );
        assert_eq!(
            err("not cron"),
            "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), found 2"
        );
        assert_eq!(err("@fortnightly"), "unknown alias \"@fortnightly\"");
        assert_eq!(
            err(""),
            "expected 5 fields (minute hour day-of-month month day-of-week) or 6 (seconds first), found 0"
        );
    }

    #[test]
    fn wildcards_are_the_patterns_whose_clock_fields_start_with_a_star() {
        let wild = |p: &str| p.parse::<Cron>().unwrap().is_wildcard();
        assert!(wild("*/15 * * * *"));
        assert!(wild("0 * * * *"));
        assert!(wild("*/2 * * * * *"));
        assert!(!wild("30 2 * * *"));
        assert!(!wild("0 9 * * MON-FRI"));
        assert!(!wild("0 9,17 * * *"));
    }
}
