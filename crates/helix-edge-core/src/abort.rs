//! Cooperative cancellation: the signal a run raises when it is aborted, interrupted
//! or past a tool's timeout, which model calls and tools poll. It knows nothing of what
//! it cancels.

use std::cell::Cell;
use std::rc::Rc;

/// A cooperative cancellation flag a tool can poll. A call's signal is a child of its
/// run's: raised by the call's timeout, or by the run's interrupt or abort.
#[derive(Debug, Clone, Default)]
pub struct AbortSignal(Rc<Signal>);

#[derive(Debug, Default)]
struct Signal {
    raised: Cell<bool>,
    parent: Option<AbortSignal>,
}

impl AbortSignal {
    /// A signal that is not raised.
    pub fn new() -> Self {
        Self::default()
    }

    /// A signal raised with this one, or on its own.
    pub fn child(&self) -> Self {
        Self(Rc::new(Signal {
            raised: Cell::new(false),
            parent: Some(self.clone()),
        }))
    }

    /// Raises the signal (and its children's).
    pub fn abort(&self) {
        self.0.raised.set(true);
    }

    /// Whether it, or a parent, was raised.
    pub fn is_aborted(&self) -> bool {
        self.0.raised.get() || self.0.parent.as_ref().is_some_and(AbortSignal::is_aborted)
    }
}
