//! The platform's time zone rules (feature `schedules`): a zone's offset at an instant
//! from the runtime's own database (ICU's, through `Intl.DateTimeFormat`), so that no
//! zone database rides in the bundle. One formatter per zone, made on first use.

use helix_edge_core::schedule::zone::Zones;
use std::cell::RefCell;
use wasm_bindgen::prelude::*;
use worker::js_sys::Object;

#[wasm_bindgen]
extern "C" {
    /// `Intl.DateTimeFormat`.
    #[wasm_bindgen(js_namespace = Intl)]
    type DateTimeFormat;

    /// `new Intl.DateTimeFormat(locale, options)`: throws on a zone it does not know.
    #[wasm_bindgen(constructor, catch, js_namespace = Intl)]
    fn new(locale: &str, options: &Object) -> Result<DateTimeFormat, JsValue>;

    /// `format(ms)`: the instant's clock time in the formatter's zone.
    #[wasm_bindgen(method)]
    fn format(this: &DateTimeFormat, ms: f64) -> String;
}

/// The runtime's zone rules.
pub struct Intl;

thread_local! {
    /// Each zone's formatter (or `None`: no such zone), by name.
    static FORMATS: RefCell<Vec<(String, Option<DateTimeFormat>)>> = const { RefCell::new(Vec::new()) };
}

/// A formatter of zone `name` that writes `M/D/YYYY, HH:MM:SS` (24-hour clock).
fn formatter(name: &str) -> Option<DateTimeFormat> {
    let options = Object::new();
    let set = |key: &str, value: &str| {
        worker::js_sys::Reflect::set(&options, &key.into(), &value.into()).is_ok()
    };
    let numeric = ["year", "month", "day", "hour", "minute", "second"];
    let all_set = set("timeZone", name)
        && set("hourCycle", "h23")
        && numeric.iter().all(|field| set(field, "numeric"));
    all_set
        .then(|| DateTimeFormat::new("en-US", &options).ok())
        .flatten()
}

/// Reads `M/D/YYYY, H:MM:SS` into seconds of its civil time since 1970-01-01.
fn civil_secs(text: &str) -> Option<i64> {
    let mut n = text
        .split(|c: char| !c.is_ascii_digit())
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<i64>().ok());
    let (month, day, year) = (n.next()??, n.next()??, n.next()??);
    let (hour, minute, second) = (n.next()??, n.next()??, n.next()??);
    let date = helix_edge_core::schedule::civil::days_from_civil(
        year,
        u32::try_from(month).ok()?,
        u32::try_from(day).ok()?,
    );
    Some(date * 86_400 + hour * 3600 + minute * 60 + second)
}

impl Zones for Intl {
    fn offset(&self, name: &str, utc_secs: i64) -> Option<i32> {
        FORMATS.with_borrow_mut(|formats| {
            let at = match formats.iter().position(|(n, _)| n == name) {
                Some(at) => at,
                None => {
                    formats.push((name.to_string(), formatter(name)));
                    formats.len() - 1
                }
            };
            let format = formats[at].1.as_ref()?;
            let shown = civil_secs(&format.format(utc_secs as f64 * 1000.0))?;
            i32::try_from(shown - utc_secs).ok()
        })
    }
}
