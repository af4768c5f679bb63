//! The retry policy's pieces: when a provider asks to be retried (`Retry-After`,
//! `retry-after-ms`), how long to back off otherwise, and which statuses are worth a
//! retry.

use crate::error::ProviderError;
use serde_json::Value;

/// Longest `Retry-After` honoured; a provider asking for more fails the call instead.
pub const MAX_RETRY_AFTER_MS: u64 = 60_000;
const MAX_BACKOFF_MS: u64 = 8_000;

/// Parses `Retry-After` (seconds or an HTTP date) or `retry-after-ms` into milliseconds.
pub fn retry_after_ms(
    retry_after: Option<&str>,
    retry_after_ms: Option<&str>,
    now_ms: u64,
) -> Option<u64> {
    if let Some(ms) = retry_after_ms.and_then(|v| decimal_millis(v.trim(), 1)) {
        return Some(ms);
    }
    let value = retry_after?.trim();
    if let Some(ms) = decimal_millis(value, 1000) {
        return Some(ms);
    }
    http_date_ms(value).map(|at| at.saturating_sub(now_ms))
}

/// Parses a non-negative decimal (`2`, `0.5`) times `scale`, without float parsing.
fn decimal_millis(text: &str, scale: u64) -> Option<u64> {
    let (whole, frac) = text.split_once('.').unwrap_or((text, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if whole.is_empty() && frac.is_empty() || !digits(whole) || !digits(frac) {
        return None;
    }
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().ok()?
    };
    let mut value = whole.checked_mul(scale)?;
    let mut unit = scale;
    for b in frac.bytes().take(6) {
        unit /= 10;
        value += u64::from(b - b'0') * unit;
    }
    Some(value)
}

/// Parses an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`) to ms since the epoch.
fn http_date_ms(value: &str) -> Option<u64> {
    let parts: Vec<&str> = value.split_whitespace().collect();
    let [_, day, month, year, time, "GMT"] = parts.as_slice() else {
        return None;
    };
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| m == month)? as i64
        + 1;
    let (day, year): (i64, i64) = (day.parse().ok()?, year.parse().ok()?);
    let hms: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, s] = hms.as_slice() else {
        return None;
    };
    // Days from civil (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from((days * 86_400 + h * 3600 + m * 60 + s) * 1000).ok()
}

/// Exponential backoff with jitter: between half and all of `base * 2^attempt`, capped.
pub fn backoff_ms(base_ms: u64, attempt: u32, random: f64) -> u64 {
    let ceiling = base_ms
        .saturating_mul(1u64 << attempt.min(16))
        .min(MAX_BACKOFF_MS);
    (ceiling as f64 * (0.5 + random.clamp(0.0, 1.0) / 2.0)) as u64
}

/// Classifies a non-2xx answer; `message` is the provider's, already scrubbed.
pub fn classify(status: u16, retry_after_ms: Option<u64>, message: String) -> ProviderError {
    match status {
        429 => ProviderError::RateLimited { retry_after_ms },
        401 | 403 => ProviderError::Auth { status },
        408 => ProviderError::Timeout,
        409 | 425 | 500..=599 => ProviderError::Unavailable { status },
        _ => ProviderError::BadRequest { message },
    }
}

/// The provider's own error message from an error body, if it has one.
pub(super) fn error_message(body: &str) -> String {
    let parsed: Option<Value> = serde_json::from_str(body).ok();
    let message = parsed
        .as_ref()
        .and_then(|v| v.get("error"))
        .and_then(|e| match e {
            Value::String(s) => Some(s.clone()),
            other => other
                .get("message")
                .and_then(Value::as_str)
                .map(String::from),
        });
    message.unwrap_or_else(|| body.chars().take(300).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_accepts_seconds_milliseconds_and_http_dates() {
        assert_eq!(retry_after_ms(Some("2"), None, 0), Some(2_000));
        assert_eq!(retry_after_ms(Some("0.5"), None, 0), Some(500));
        assert_eq!(
            retry_after_ms(Some("2"), Some("150"), 0),
            Some(150),
            "retry-after-ms is more precise"
        );
        let at = 784_111_777_000; // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            retry_after_ms(Some("Sun, 06 Nov 1994 08:49:37 GMT"), None, at - 3_000),
            Some(3_000)
        );
        assert_eq!(
            retry_after_ms(Some("Sun, 06 Nov 1994 08:49:37 GMT"), None, at + 1),
            Some(0),
            "in the past"
        );
        assert_eq!(retry_after_ms(Some("soon"), None, 0), None);
        assert_eq!(retry_after_ms(Some("-1"), None, 0), None);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_is_capped() {
        assert_eq!(
            (backoff_ms(500, 0, 0.0), backoff_ms(500, 0, 1.0)),
            (250, 500)
        );
        assert_eq!(
            (backoff_ms(500, 2, 0.0), backoff_ms(500, 2, 1.0)),
            (1_000, 2_000)
        );
        assert_eq!(backoff_ms(500, 30, 1.0), MAX_BACKOFF_MS);
    }

    #[test]
    fn statuses_map_to_retryable_codes() {
        use crate::error::Coded;
        let cases = [
            (429, "provider_rate_limited", true),
            (401, "provider_auth", false),
            (500, "provider_unavailable", true),
            (529, "provider_unavailable", true),
            (400, "provider_bad_request", false),
            (408, "provider_timeout", true),
        ];
        for (status, code, retryable) in cases {
            let e = classify(status, None, "m".into());
            assert_eq!((e.code(), e.retryable()), (code, retryable), "{status}");
        }
    }
}
