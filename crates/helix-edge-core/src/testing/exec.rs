//! Running futures in tests without a runtime: to completion, or until they wait on
//! something that never comes.

use futures::task::ArcWake;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

/// Runs a future that must complete without waiting on anything.
pub fn block<F: Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

/// Lets other tasks run once.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

/// A waker that records that it was woken.
pub(super) struct Flag(pub AtomicBool);

impl ArcWake for Flag {
    fn wake_by_ref(flag: &Arc<Self>) {
        flag.0.store(true, Ordering::SeqCst);
    }
}

/// Polls `f` while something wakes it; `None` once it waits on nothing that comes.
pub(super) fn poll_while_woken<F: Future>(
    mut f: Pin<&mut F>,
    flag: &Arc<Flag>,
) -> Option<F::Output> {
    let waker = futures::task::waker(flag.clone());
    let mut cx = Context::from_waker(&waker);
    while flag.0.swap(false, Ordering::SeqCst) {
        if let Poll::Ready(out) = f.as_mut().poll(&mut cx) {
            return Some(out);
        }
    }
    None
}

/// Polls `f` while it makes progress; `None` if it stalls waiting on something that
/// never comes (a hung model or tool).
pub fn run_until_stalled<F: Future>(f: F) -> Option<F::Output> {
    poll_while_woken(pin!(f), &Arc::new(Flag(AtomicBool::new(true))))
}
