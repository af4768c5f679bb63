//! Time zone rules: the UTC offset of an IANA zone at an instant ([`Zones`]). The core
//! carries no zone database into a bundle: on Workers the platform's own (ICU's, through
//! `Intl.DateTimeFormat`) is installed by the platform layer; natively the IANA database
//! (jiff's, built in) answers, and is the oracle the platform's answers are tested
//! against. `UTC` needs neither.
//!
//! The source is installed once per isolate ([`install`]) and read where a schedule's
//! next fire is computed ([`offset`]), like the platform's clock.

use std::cell::RefCell;
use std::rc::Rc;

/// Offsets of IANA time zones.
pub trait Zones {
    /// Zone `name`'s offset from UTC (seconds east) at `utc_secs` (seconds since the
    /// Unix epoch); `None` when there is no zone by that name.
    fn offset(&self, name: &str, utc_secs: i64) -> Option<i32>;
}

thread_local! {
    static INSTALLED: RefCell<Option<Rc<dyn Zones>>> = const { RefCell::new(None) };
}

/// Makes `zones` the source of this isolate's (or thread's) zone rules.
pub fn install(zones: Rc<dyn Zones>) {
    INSTALLED.with_borrow_mut(|installed| *installed = Some(zones));
}

/// Whether a source is installed (natively one always answers: the IANA database).
pub fn installed() -> bool {
    INSTALLED.with_borrow(Option::is_some) || cfg!(not(target_arch = "wasm32"))
}

/// Zone `name`'s offset at `utc_secs` from the installed source (natively, the IANA
/// database when none is); `UTC` is always known.
pub fn offset(name: &str, utc_secs: i64) -> Option<i32> {
    if matches!(name, "UTC" | "Etc/UTC") {
        return Some(0);
    }
    let installed = INSTALLED.with_borrow(Clone::clone);
    match installed {
        Some(zones) => zones.offset(name, utc_secs),
        None => fallback(name, utc_secs),
    }
}

#[cfg(not(target_arch = "wasm32"))]
fn fallback(name: &str, utc_secs: i64) -> Option<i32> {
    Tzdb.offset(name, utc_secs)
}

#[cfg(target_arch = "wasm32")]
fn fallback(_: &str, _: i64) -> Option<i32> {
    None
}

/// The IANA time zone database built into jiff: the native source, and the oracle the
/// platform's rules are checked against.
#[cfg(not(target_arch = "wasm32"))]
#[derive(Debug, Clone, Copy, Default)]
pub struct Tzdb;

#[cfg(not(target_arch = "wasm32"))]
impl Zones for Tzdb {
    fn offset(&self, name: &str, utc_secs: i64) -> Option<i32> {
        thread_local! {
            static READ: RefCell<Vec<(String, jiff::tz::TimeZone)>> = const { RefCell::new(Vec::new()) };
        }
        let at = jiff::Timestamp::from_second(utc_secs).ok()?;
        READ.with_borrow_mut(|read| {
            if let Some((_, zone)) = read.iter().find(|(n, _)| n == name) {
                return Some(zone.to_offset(at).seconds());
            }
            let zone = jiff::tz::TimeZone::get(name).ok()?;
            let offset = zone.to_offset(at).seconds();
            read.push((name.to_string(), zone));
            Some(offset)
        })
    }
}

#[cfg(all(test, not(target_arch = "wasm32")))]
mod tests {
    use super::*;

    #[test]
    fn the_database_knows_zones_and_their_changes() {
        // 2026-07-01T00:00:00Z and 2026-01-01T00:00:00Z.
        let (summer, winter) = (1_782_864_000, 1_767_225_600);
        assert_eq!(offset("Europe/Berlin", summer), Some(7200));
        assert_eq!(offset("Europe/Berlin", winter), Some(3600));
        assert_eq!(offset("Australia/Sydney", summer), Some(36_000));
        assert_eq!(offset("Australia/Sydney", winter), Some(39_600));
        assert_eq!(offset("Asia/Kolkata", summer), Some(19_800));
        assert_eq!(offset("UTC", summer), Some(0));
        assert_eq!(offset("Mars/Olympus", summer), None);
    }

    #[test]
    fn an_installed_source_answers_instead() {
        struct Fixed;
        impl Zones for Fixed {
            fn offset(&self, name: &str, _: i64) -> Option<i32> {
                (name == "Test/Fixed").then_some(-3600)
            }
        }
        std::thread::spawn(|| {
            install(Rc::new(Fixed));
            assert_eq!(offset("Test/Fixed", 0), Some(-3600));
            assert_eq!(offset("Europe/Berlin", 0), None);
            assert_eq!(offset("UTC", 0), Some(0));
        })
        .join()
        .unwrap();
    }
}
