//! Civil time: dates and times of the proleptic Gregorian calendar counted as seconds
//! from 1970-01-01T00:00:00 of their own clock (no zone), and RFC 3339 timestamps read
//! and written. Pure arithmetic (Howard Hinnant's day algorithms): the zone rules that
//! map a civil time to an instant are [`super::zone`]'s.

/// Seconds in a day.
pub const DAY: i64 = 86_400;

/// A civil date and time of day, to the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Civil {
    /// The year (1970 and later here; earlier ones are valid arithmetic).
    pub year: i64,
    /// 1–12.
    pub month: u32,
    /// 1–31.
    pub day: u32,
    /// 0–23.
    pub hour: u32,
    /// 0–59.
    pub minute: u32,
    /// 0–59.
    pub second: u32,
}

/// Days from 1970-01-01 to `year-month-day`.
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date `days` after 1970-01-01: `(year, month, day)`.
pub fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Whether `year` has a 29 February.
pub fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// How many days `month` of `year` has.
pub fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// The weekday of the date `days` after 1970-01-01: 0 Sunday … 6 Saturday.
pub fn weekday(days: i64) -> u32 {
    (days + 4).rem_euclid(7) as u32
}

impl Civil {
    /// The civil time `secs` seconds after 1970-01-01T00:00:00.
    pub fn from_secs(secs: i64) -> Self {
        let (year, month, day) = civil_from_days(secs.div_euclid(DAY));
        let rest = secs.rem_euclid(DAY) as u32;
        Self {
            year,
            month,
            day,
            hour: rest / 3600,
            minute: rest / 60 % 60,
            second: rest % 60,
        }
    }

    /// Seconds from 1970-01-01T00:00:00 to this civil time.
    pub fn to_secs(self) -> i64 {
        days_from_civil(self.year, self.month, self.day) * DAY
            + i64::from(self.hour * 3600 + self.minute * 60 + self.second)
    }

    /// Days from 1970-01-01 to its date.
    pub fn days(self) -> i64 {
        days_from_civil(self.year, self.month, self.day)
    }
}

/// Why a timestamp is not RFC 3339.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimestampError {
    /// Not the shape `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`.
    #[error("expected YYYY-MM-DDTHH:MM:SS with an offset (Z or ±HH:MM)")]
    Shape,
    /// A field out of its range (the 30th of February, hour 24, an offset past 23:59).
    #[error("{0} is out of range")]
    Range(&'static str),
    /// No offset: a local time names no instant.
    #[error("no offset (Z or ±HH:MM): a time without one names no instant")]
    NoOffset,
}

/// `text` (RFC 3339: `2026-11-26T09:00:00Z`, `2026-11-26t10:00:00.25+01:00`) as
/// milliseconds since the Unix epoch (negative before 1970); fractions past the
/// millisecond are cut.
pub fn parse_rfc3339(text: &str) -> Result<i64, TimestampError> {
    let b = text.as_bytes();
    let digits = |from: usize, n: usize| -> Result<u32, TimestampError> {
        let part = b.get(from..from + n).ok_or(TimestampError::Shape)?;
        part.iter().try_fold(0u32, |acc, &c| match c {
            b'0'..=b'9' => Ok(acc * 10 + u32::from(c - b'0')),
            _ => Err(TimestampError::Shape),
        })
    };
    let sep = |at: usize, allowed: &[u8]| match b.get(at) {
        Some(c) if allowed.contains(c) => Ok(()),
        _ => Err(TimestampError::Shape),
    };
    let year = i64::from(digits(0, 4)?);
    sep(4, b"-")?;
    let month = digits(5, 2)?;
    sep(7, b"-")?;
    let day = digits(8, 2)?;
    sep(10, b"Tt ")?;
    let hour = digits(11, 2)?;
    sep(13, b":")?;
    let minute = digits(14, 2)?;
    sep(16, b":")?;
    let second = digits(17, 2)?;
    if !(1..=12).contains(&month) {
        return Err(TimestampError::Range("the month"));
    }
    if day == 0 || day > days_in_month(year, month) {
        return Err(TimestampError::Range("the day"));
    }
    if hour > 23 {
        return Err(TimestampError::Range("the hour"));
    }
    if minute > 59 {
        return Err(TimestampError::Range("the minute"));
    }
    // A leap second (:60) is read as the last second of its minute.
    if second > 60 {
        return Err(TimestampError::Range("the second"));
    }
    let mut at = 19;
    let mut millis = 0u32;
    if b.get(at) == Some(&b'.') {
        at += 1;
        let start = at;
        while b.get(at).is_some_and(u8::is_ascii_digit) {
            if at - start < 3 {
                millis = millis * 10 + u32::from(b[at] - b'0');
            }
            at += 1;
        }
        if at == start {
            return Err(TimestampError::Shape);
        }
        for _ in (at - start)..3 {
            millis *= 10;
        }
    }
    let offset = match b.get(at) {
        Some(b'Z' | b'z') if at + 1 == b.len() => 0,
        Some(&sign @ (b'+' | b'-')) if at + 6 == b.len() => {
            let (h, m) = (digits(at + 1, 2)?, digits(at + 4, 2)?);
            sep(at + 3, b":")?;
            if h > 23 || m > 59 {
                return Err(TimestampError::Range("the offset"));
            }
            let secs = i64::from(h * 3600 + m * 60);
            if sign == b'-' { -secs } else { secs }
        }
        None => return Err(TimestampError::NoOffset),
        _ => return Err(TimestampError::Shape),
    };
    let civil = Civil {
        year,
        month,
        day,
        hour,
        minute,
        second: second.min(59),
    };
    Ok((civil.to_secs() - offset) * 1000 + i64::from(millis))
}

/// `ms` since the Unix epoch in RFC 3339, UTC: `2026-11-26T09:00:00Z`, with the
/// milliseconds only when there are some (`…:00.5Z`, `…:00.25Z`, `…:00.125Z`).
pub fn format_rfc3339(ms: i64) -> String {
    let c = Civil::from_secs(ms.div_euclid(1000));
    let millis = ms.rem_euclid(1000);
    let mut out = format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        c.year, c.month, c.day, c.hour, c.minute, c.second
    );
    if millis != 0 {
        let fraction = format!("{millis:03}");
        out.push('.');
        out.push_str(fraction.trim_end_matches('0'));
    }
    out.push('Z');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn days_round_trip_across_leap_years_and_centuries() {
        for days in (-800_000..800_000).step_by(97) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(weekday(0), 4, "1970-01-01 was a Thursday");
        assert_eq!(weekday(days_from_civil(2026, 11, 28)), 6, "a Saturday");
    }

    #[test]
    fn timestamps_read_with_offsets_fractions_and_lower_case() {
        let nine = parse_rfc3339("2026-11-26T09:00:00Z").unwrap();
        assert_eq!(nine, 1_795_683_600_000);
        assert_eq!(parse_rfc3339("2026-11-26T10:00:00+01:00"), Ok(nine));
        assert_eq!(parse_rfc3339("2026-11-26t04:30:00-04:30"), Ok(nine));
        assert_eq!(parse_rfc3339("2026-11-26 09:00:00.5z"), Ok(nine + 500));
        assert_eq!(
            parse_rfc3339("2026-11-26T09:00:00.123456789Z"),
            Ok(nine + 123)
        );
        assert_eq!(parse_rfc3339("1969-12-31T23:59:59Z"), Ok(-1000));
    }

    #[test]
    fn malformed_timestamps_say_what_is_wrong() {
        use TimestampError::*;
        assert_eq!(parse_rfc3339("2026-11-26T09:00:00"), Err(NoOffset));
        assert_eq!(parse_rfc3339("tomorrow at nine"), Err(Shape));
        assert_eq!(parse_rfc3339("2026-02-30T09:00:00Z"), Err(Range("the day")));
        assert_eq!(
            parse_rfc3339("2026-13-01T09:00:00Z"),
            Err(Range("the month"))
        );
        assert_eq!(
            parse_rfc3339("2026-11-26T24:00:00Z"),
            Err(Range("the hour"))
        );
        assert_eq!(
            parse_rfc3339("2026-11-26T09:00:00+24:00"),
            Err(Range("the offset"))
        );
        assert_eq!(parse_rfc3339("2026-11-26T09:00:00.Z"), Err(Shape));
        assert_eq!(parse_rfc3339("2026-11-26T09:00:00Z "), Err(Shape));
        assert_eq!(parse_rfc3339("2026-11-26T09:00:00+0100"), Err(Shape));
        assert_eq!(parse_rfc3339(""), Err(Shape));
        assert_eq!(parse_rfc3339("２０２６-11-26T09:00:00Z"), Err(Shape));
    }

    #[test]
    fn timestamps_are_written_in_utc_with_the_millis_they_have() {
        assert_eq!(format_rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(format_rfc3339(1_795_683_600_000), "2026-11-26T09:00:00Z");
        assert_eq!(format_rfc3339(1_795_683_600_500), "2026-11-26T09:00:00.5Z");
        assert_eq!(format_rfc3339(1_795_683_600_120), "2026-11-26T09:00:00.12Z");
        assert_eq!(
            format_rfc3339(1_795_683_600_007),
            "2026-11-26T09:00:00.007Z"
        );
        for ms in [0, 951_782_400_000, 1_795_683_600_123, 4_102_444_799_999] {
            assert_eq!(parse_rfc3339(&format_rfc3339(ms)), Ok(ms));
        }
    }
}
