//! The runtime's time zone rules (`Intl`, ICU's database), which a deployed worker reads
//! cron patterns in, against the IANA database (jiff's) that native runs use: the same
//! offsets on both sides of every change from 2010 to 2030 in zones of both
//! hemispheres, a half-hour change, zones whose rules changed (São Paulo, Moscow,
//! Tehran) and a zone that skipped a whole day (Apia); and the same cron fires from both.

#![cfg(all(target_arch = "wasm32", feature = "schedules"))]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use helix_edge::schedule::When;
use helix_edge::schedule::zone::{self, Zones};
use helix_edge::zones::Intl;
use std::rc::Rc;
use wasm_bindgen_test::wasm_bindgen_test;

const ZONES: &[&str] = &[
    "Europe/Berlin",
    "America/New_York",
    "Australia/Sydney",
    "Australia/Lord_Howe",
    "Asia/Kolkata",
    "America/Sao_Paulo",
    "Europe/Moscow",
    "Asia/Tehran",
    "Pacific/Apia",
];

/// jiff's IANA database, as a source of zone rules (each zone read once).
#[derive(Default)]
struct Iana(std::cell::RefCell<Vec<(String, jiff::tz::TimeZone)>>);

impl Zones for Iana {
    fn offset(&self, name: &str, utc_secs: i64) -> Option<i32> {
        let at = jiff::Timestamp::from_second(utc_secs).ok()?;
        let mut read = self.0.borrow_mut();
        if !read.iter().any(|(n, _)| n == name) {
            read.push((name.to_string(), jiff::tz::TimeZone::get(name).ok()?));
        }
        let (_, zone) = read.iter().find(|(n, _)| n == name)?;
        Some(zone.to_offset(at).seconds())
    }
}

/// 2010-01-01 and 2030-01-01, in seconds.
const FROM: i64 = 1_262_304_000;
const TO: i64 = 1_893_456_000;

#[wasm_bindgen_test]
fn the_runtime_and_the_iana_database_agree_around_every_change() {
    let (mut checked, iana) = (0, Iana::default());
    for name in ZONES {
        let zone = jiff::tz::TimeZone::get(name).unwrap();
        let start = jiff::Timestamp::from_second(FROM).unwrap();
        for transition in zone.following(start) {
            let at = transition.timestamp().as_second();
            if at >= TO {
                break;
            }
            for t in [at - 3600, at - 1, at, at + 1, at + 3600] {
                assert_eq!(Intl.offset(name, t), iana.offset(name, t), "{name} at {t}");
                checked += 1;
            }
        }
        // And twice a month in between, changes or not.
        for t in (FROM..TO).step_by(15 * 86_400) {
            assert_eq!(Intl.offset(name, t), iana.offset(name, t), "{name} at {t}");
        }
    }
    assert!(checked > 500, "{checked} instants around changes");
    assert_eq!(Intl.offset("Mars/Olympus", FROM), None, "an unknown zone");
}

#[wasm_bindgen_test]
fn cron_fires_the_same_under_both() {
    let patterns = [
        "30 2 * * *",
        "*/20 * * * *",
        "0 9 * * MON-FRI",
        "45 1 * * *",
    ];
    let intl: Rc<dyn Zones> = Rc::new(Intl);
    let iana: Rc<dyn Zones> = Rc::new(Iana::default());
    for name in ZONES {
        for pattern in patterns {
            let when = When::Cron {
                pattern: pattern.into(),
                timezone: (*name).into(),
            };
            let fires = |zones: Rc<dyn Zones>| {
                zone::install(zones);
                // 2026's fires, from 1 March to 15 November, a day at a time.
                let mut at = 1_772_323_200_000_u64;
                let mut out = Vec::new();
                while at < 1_794_700_800_000 {
                    at = when.next_after(at + 86_400_000 - 1).unwrap();
                    out.push(at);
                }
                out
            };
            assert_eq!(
                fires(intl.clone()),
                fires(iana.clone()),
                "{pattern} in {name}"
            );
        }
    }
}
