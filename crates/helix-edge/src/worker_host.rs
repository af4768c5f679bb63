//! The Workers clock, timers and CSPRNG as the core's [`Host`], the log, and small helpers
//! around env.

use crate::host::{Host, Level, LogValue};
use futures::future::LocalBoxFuture;
use std::cell::Cell;
use std::time::Duration;

thread_local! {
    /// The least level printed; read once per isolate from `LOG_LEVEL`.
    static MIN_LEVEL: Cell<Option<Level>> = const { Cell::new(None) };
}

/// What every entry does first, once per isolate: installs the panic hook (a panic's
/// message and location reach the Workers logs before the instance resets) and reads
/// `LOG_LEVEL` (`debug`, `info`, `warn`, `error`; unset or anything else: `info`).
pub fn start(env: &worker::Env) {
    if MIN_LEVEL.get().is_none() {
        console_error_panic_hook::set_once();
        let configured = config_value(env, "LOG_LEVEL");
        let level = configured.as_deref().and_then(Level::parse);
        MIN_LEVEL.set(Some(level.unwrap_or(Level::Info)));
    }
}

fn enabled(level: Level) -> bool {
    level >= MIN_LEVEL.get().unwrap_or(Level::Info)
}

/// Time from `Date.now()`, ids from `crypto.getRandomValues`.
pub struct WorkerHost;

/// `n` random bytes as lower-case hex (from the platform CSPRNG).
pub fn random_hex(n: usize) -> String {
    let mut bytes = vec![0u8; n];
    if getrandom::fill(&mut bytes).is_err() {
        // The Workers runtime always provides crypto; this path is not expected.
        for b in &mut bytes {
            *b = (worker::js_sys::Math::random() * 256.0) as u8;
        }
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl Host for WorkerHost {
    fn now_ms(&self) -> u64 {
        worker::Date::now().as_millis()
    }

    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()> {
        // `setTimeout`, cleared if the future is dropped first. Its delay is an i32: a
        // longer one would fire at once, so it is capped (at about 24 days).
        let ms = ms.min(i32::MAX as u64);
        Box::pin(worker::Delay::from(Duration::from_millis(ms)))
    }

    fn new_id(&self, kind: &str) -> String {
        format!("{kind}_{}", random_hex(12))
    }

    fn random_hex(&self, bytes: usize) -> String {
        random_hex(bytes)
    }

    fn log(&self, level: Level, event: &str, fields: &[(&str, LogValue<'_>)]) {
        if !enabled(level) {
            return;
        }
        let mut line = format!(
            "{{\"event\":{},\"level\":\"{}\",\"ts\":{}",
            LogValue::Str(event).to_json(),
            level.as_str(),
            worker::Date::now().as_millis()
        );
        for (key, value) in fields {
            line.push_str(&format!(
                ",{}:{}",
                LogValue::Str(key).to_json(),
                value.to_json()
            ));
        }
        line.push('}');
        print(level, &line);
    }
}

/// Prints a log line with the console method of its level: the platform keeps the
/// level (Workers Logs filter on it), and `wrangler dev` prints `info` and `debug` lines
/// as they are, where it source-maps every `console.log` line (~2 ms of its CPU each).
fn print(level: Level, line: &str) {
    use worker::worker_sys::web_sys::console;
    let line = worker::wasm_bindgen::JsValue::from_str(line);
    match level {
        Level::Debug => console::debug_1(&line),
        Level::Info => console::info_1(&line),
        Level::Warn => console::warn_1(&line),
        Level::Error => console::error_1(&line),
    }
}

/// A var or secret, whichever is set (secrets win); empty values count as unset.
pub fn config_value(env: &worker::Env, name: &str) -> Option<String> {
    env.secret(name)
        .map(|s| s.to_string())
        .or_else(|_| env.var(name).map(|v| v.to_string()))
        .ok()
        .filter(|v| !v.is_empty())
}

/// One structured log line, if `level` is enabled.
pub fn log(level: Level, event: &str, fields: serde_json::Value) {
    if !enabled(level) {
        return;
    }
    let ts = worker::Date::now().as_millis();
    let mut line = serde_json::json!({ "event": event, "level": level.as_str(), "ts": ts });
    if let (Some(obj), serde_json::Value::Object(extra)) = (line.as_object_mut(), fields) {
        obj.extend(extra);
    }
    print(level, &line.to_string());
}
