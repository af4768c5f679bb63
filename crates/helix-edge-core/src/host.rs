//! What the core needs from its environment but must not reach for itself: the clock,
//! timers and fresh ids. The platform passes the Workers clock, timers and CSPRNG;
//! tests pass [`ManualHost`], so every run is deterministic.

use futures::future::LocalBoxFuture;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::task::{Poll, Waker};

/// The clock, timers and id source of a runner.
pub trait Host {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> u64;
    /// Resolves after `ms` milliseconds (server tools' timeouts).
    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()>;
    /// A fresh, unique id; `kind` is a short prefix such as `run` or `ckpt`.
    fn new_id(&self, kind: &str) -> String;
    /// Records a structured event at `level` (the platform prints one JSON line when
    /// the level is enabled). Fields never carry secrets, tool arguments or results.
    fn log(&self, _level: Level, _event: &str, _fields: &[(&str, LogValue<'_>)]) {}
    /// `bytes` random bytes as lowercase hex (trace and span ids). By default drawn
    /// from [`new_id`](Self::new_id), mixed (deterministic where the ids are); the
    /// platform's come from its CSPRNG.
    fn random_hex(&self, bytes: usize) -> String {
        // FNV-1a over a fresh id seeds splitmix64.
        let id = self.new_id("rnd");
        let mut state = id.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
        let mut out = String::with_capacity(bytes * 2);
        while out.len() < bytes * 2 {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            out.push_str(&format!("{:016x}", z ^ (z >> 31)));
        }
        out.truncate(bytes * 2);
        out
    }
}

/// How much an event matters. A run's boundaries (started, suspended, resumed, ended)
/// are `Info`; what happens inside a step (each model call, each tool, each
/// intermediate commit) is `Debug`; failures are `Warn` or `Error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Inside a step: `model_call`, `tool_executed`, `step_committed`.
    Debug,
    /// A run's boundaries.
    Info,
    /// Something failed that the runtime works around or reports on the run.
    Warn,
    /// Something failed that needs an operator.
    Error,
}

impl Level {
    /// `debug`, `info`, `warn` or `error`; anything else is `None`.
    pub fn parse(name: &str) -> Option<Level> {
        match name {
            "debug" => Some(Level::Debug),
            "info" => Some(Level::Info),
            "warn" => Some(Level::Warn),
            "error" => Some(Level::Error),
            _ => None,
        }
    }

    /// The name printed in each log line.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// One field value of a log event: only plain scalars, by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogValue<'a> {
    /// A string.
    Str(&'a str),
    /// A count, a duration or an id number.
    Num(u64),
    /// A flag.
    Bool(bool),
    /// Absent.
    Null,
}

impl LogValue<'_> {
    /// The JSON text of the value.
    pub fn to_json(&self) -> String {
        match self {
            Self::Str(s) => serde_json::to_string(s).unwrap_or_default(),
            Self::Num(n) => n.to_string(),
            Self::Bool(b) => b.to_string(),
            Self::Null => "null".into(),
        }
    }
}

/// A host with a hand-moved clock and counting ids that records log events, for tests.
/// Its timers fire when [`advance`](ManualHost::advance) moves the clock past them.
#[derive(Debug)]
pub struct ManualHost {
    now: Cell<u64>,
    next: Cell<u64>,
    tag: String,
    logs: RefCell<Vec<(Level, String, serde_json::Value)>>,
    timers: RefCell<Vec<(u64, Rc<Timer>)>>,
}

/// One pending [`ManualHost::sleep`].
#[derive(Debug, Default)]
struct Timer {
    fired: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Timer {
    fn fire(&self) {
        self.fired.set(true);
        if let Some(waker) = self.waker.take() {
            waker.wake();
        }
    }
}

impl ManualHost {
    /// A host whose clock starts at `now_ms`. `tag` keeps ids of two hosts apart.
    pub fn new(now_ms: u64, tag: &str) -> Self {
        Self {
            now: Cell::new(now_ms),
            next: Cell::new(1),
            tag: tag.into(),
            logs: Default::default(),
            timers: Default::default(),
        }
    }

    /// The log events recorded so far, at every level.
    pub fn logs(&self) -> Vec<(String, serde_json::Value)> {
        self.logs_at(Level::Debug)
    }

    /// The log events recorded so far at `min` or above (what a platform configured
    /// with that level prints).
    pub fn logs_at(&self, min: Level) -> Vec<(String, serde_json::Value)> {
        let logs = self.logs.borrow();
        let enabled = logs.iter().filter(|(level, ..)| *level >= min);
        enabled.map(|(_, e, f)| (e.clone(), f.clone())).collect()
    }

    /// Moves the clock forward, firing the timers it passes.
    pub fn advance(&self, ms: u64) {
        let now = self.now.get() + ms;
        self.now.set(now);
        let due: Vec<_> = {
            let mut timers = self.timers.borrow_mut();
            let (due, later) = timers.drain(..).partition(|(at, _)| *at <= now);
            *timers = later;
            due
        };
        for (_, timer) in due {
            timer.fire();
        }
    }
}

impl Host for ManualHost {
    fn now_ms(&self) -> u64 {
        self.now.get()
    }

    fn sleep(&self, ms: u64) -> LocalBoxFuture<'static, ()> {
        let timer = Rc::new(Timer::default());
        if ms == 0 {
            timer.fire();
        } else {
            let at = self.now.get().saturating_add(ms);
            self.timers.borrow_mut().push((at, timer.clone()));
        }
        Box::pin(std::future::poll_fn(move |cx| {
            if timer.fired.get() {
                Poll::Ready(())
            } else {
                *timer.waker.borrow_mut() = Some(cx.waker().clone());
                Poll::Pending
            }
        }))
    }

    fn new_id(&self, kind: &str) -> String {
        let n = self.next.get();
        self.next.set(n + 1);
        format!("{kind}_{}{n}", self.tag)
    }

    fn log(&self, level: Level, event: &str, fields: &[(&str, LogValue<'_>)]) {
        let object = fields
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string(),
                    serde_json::from_str(&v.to_json()).unwrap_or_default(),
                )
            })
            .collect();
        self.logs
            .borrow_mut()
            .push((level, event.to_string(), serde_json::Value::Object(object)));
    }
}

/// Formats milliseconds since the Unix epoch as RFC 3339 UTC (`2026-11-22T02:31:00.000Z`).
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let (days, rem) = (secs / 86_400, secs % 86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_formats_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(rfc3339(1_795_314_660_123), "2026-11-22T02:31:00.123Z");
    }

    #[test]
    fn levels_parse_by_name_and_order_by_importance() {
        assert_eq!(Level::parse("debug"), Some(Level::Debug));
        assert_eq!(Level::parse("Warning"), None);
        assert_eq!(Level::parse("verbose"), None);
        assert!(Level::Debug < Level::Info && Level::Info < Level::Warn);
        assert!(Level::Warn < Level::Error);
        for level in [Level::Debug, Level::Info, Level::Warn, Level::Error] {
            assert_eq!(Level::parse(level.as_str()), Some(level));
        }
    }

    #[test]
    fn manual_host_ids_are_unique_and_tagged() {
        let host = ManualHost::new(5, "a");
        assert_eq!(host.new_id("run"), "run_a1");
        assert_eq!(host.new_id("run"), "run_a2");
        host.advance(10);
        assert_eq!(host.now_ms(), 15);
    }
}
