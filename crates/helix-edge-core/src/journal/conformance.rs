//! The journal conformance suites: the contracts of [`StreamLog`], [`StepAttempts`] and
//! [`Suspension`] as executable checks, written once and run against every backend
//! (natively against the in-memory ones, in workerd against a session object's
//! SQLite). Each suite takes one fresh backend; the stream log's checks walk the commit
//! protocol in order, each building on the one before. Checks return errors instead of
//! panicking, so that the suites can run inside a worker and report.

use super::{StepAttempts, StreamLog, Suspension};
use crate::chunk::StreamEvent;
use crate::error::ErrorInfo;
use crate::store::conformance::CheckResult;
use crate::store::{Answer, AnswerOutcome};
use serde_json::json;

macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if !$cond {
            return Err(format!($($msg)+));
        }
    };
}

fn end(n: u64) -> StreamEvent {
    StreamEvent::End {
        output: Some(json!(n)),
    }
}

fn fail(code: &str) -> StreamEvent {
    StreamEvent::Fail {
        error: ErrorInfo {
            code: code.into(),
            message: "m".into(),
            retryable: false,
        },
    }
}

/// The data of every stored event, in order.
fn datas(log: &dyn StreamLog) -> Vec<String> {
    log.replay(0).into_iter().map(|f| f.data).collect()
}

fn seqs(log: &dyn StreamLog) -> Vec<u64> {
    log.replay(0).into_iter().map(|f| f.seq).collect()
}

fn live_events_are_numbered_from_one_without_gaps(log: &dyn StreamLog) -> Result<(), String> {
    ensure!(log.replay(0).is_empty(), "a new log is empty");
    let (a, b) = (log.emit(end(1)), log.emit(end(2)));
    ensure!((a, b) == (1, 2), "sequence numbers {a}, {b}; expected 1, 2");
    let frames = log.replay(0);
    ensure!(frames.len() == 2, "replay gave {} events", frames.len());
    ensure!(
        frames[0].event == "end" && frames[0].data == end(1).data_json(),
        "the first event did not round-trip: {:?}",
        frames[0]
    );
    ensure!(
        log.replay(1).len() == 1,
        "replay after 1 gives the second only"
    );
    Ok(())
}

fn a_staged_batch_appears_only_when_released(log: &dyn StreamLog) -> Result<(), String> {
    log.stage("c1", 2, vec![end(3), fail("f4")]);
    ensure!(
        seqs(log) == [1, 2],
        "a staged batch is not in the stream yet"
    );
    ensure!(
        log.unconfirmed_from() == Some(1),
        "live events wait for a commit to confirm them: {:?}",
        log.unconfirmed_from()
    );
    log.release("c1");
    ensure!(
        seqs(log) == [1, 2, 3, 4],
        "released in order: {:?}",
        seqs(log)
    );
    ensure!(
        log.unconfirmed_from().is_none(),
        "a release confirms everything before it"
    );
    let frames = log.replay(3);
    ensure!(
        frames.len() == 1 && frames[0].event == "fail" && frames[0].data == fail("f4").data_json(),
        "the batch's events keep their names and data: {frames:?}"
    );
    Ok(())
}

fn a_release_drops_the_rivals_of_its_version(log: &dyn StreamLog) -> Result<(), String> {
    log.stage("c2", 3, vec![end(5)]);
    log.stage("c2-rival", 3, vec![end(50)]);
    log.stage("c3", 4, vec![end(6)]);
    log.release("c2");
    log.release("c2-rival");
    ensure!(
        datas(log).last() == Some(&end(5).data_json()),
        "the rival of a released commit never appears: {:?}",
        datas(log)
    );
    log.release("c3");
    ensure!(
        seqs(log) == [1, 2, 3, 4, 5, 6],
        "a later version still releases"
    );
    Ok(())
}

fn a_discarded_batch_never_appears(log: &dyn StreamLog) -> Result<(), String> {
    log.stage("c4", 5, vec![end(99)]);
    log.discard("c4");
    log.release("c4");
    ensure!(
        seqs(log).len() == 6,
        "a discarded batch appeared: {:?}",
        datas(log)
    );
    Ok(())
}

fn recovery_releases_the_batch_of_the_landed_commit(log: &dyn StreamLog) -> Result<(), String> {
    let live = log.emit(end(7));
    log.stage("c5", 5, vec![end(8)]);
    let recovery = log.recover(5, "c5");
    ensure!(
        recovery.torn_from.is_none(),
        "chunks before a landed commit are its own, not torn: {recovery:?}"
    );
    ensure!(
        seqs(log) == [1, 2, 3, 4, 5, 6, live, live + 1],
        "the landed commit's batch follows: {:?}",
        seqs(log)
    );
    Ok(())
}

fn recovery_drops_other_batches_and_reports_torn_chunks(log: &dyn StreamLog) -> Result<(), String> {
    let torn = log.emit(end(9));
    ensure!(
        log.unconfirmed_from() == Some(torn),
        "a live chunk after the last commit is unconfirmed from {torn}: {:?}",
        log.unconfirmed_from()
    );
    log.stage("c6", 6, vec![end(10)]);
    let recovery = log.recover(5, "c5");
    ensure!(
        recovery.torn_from == Some(torn),
        "live chunks of a step that never committed are torn from {torn}: {recovery:?}"
    );
    log.release("c6");
    ensure!(
        !datas(log).contains(&end(10).data_json()),
        "a batch whose commit did not land is gone after recovery"
    );
    log.confirm(5);
    ensure!(
        log.recover(5, "c5").torn_from.is_none() && log.unconfirmed_from().is_none(),
        "confirmed chunks are not torn again"
    );
    Ok(())
}

/// The [`StreamLog`] contract, walked in order on one empty log.
pub fn stream_log(log: &dyn StreamLog) -> Vec<CheckResult> {
    let checks: [Check<'_>; 6] = [
        ("live_events_are_numbered_from_one_without_gaps", &|| {
            live_events_are_numbered_from_one_without_gaps(log)
        }),
        ("a_staged_batch_appears_only_when_released", &|| {
            a_staged_batch_appears_only_when_released(log)
        }),
        ("a_release_drops_the_rivals_of_its_version", &|| {
            a_release_drops_the_rivals_of_its_version(log)
        }),
        ("a_discarded_batch_never_appears", &|| {
            a_discarded_batch_never_appears(log)
        }),
        ("recovery_releases_the_batch_of_the_landed_commit", &|| {
            recovery_releases_the_batch_of_the_landed_commit(log)
        }),
        (
            "recovery_drops_other_batches_and_reports_torn_chunks",
            &|| recovery_drops_other_batches_and_reports_torn_chunks(log),
        ),
    ];
    run_in_order(&checks)
}

/// A named check over a backend it captured.
type Check<'a> = (&'static str, &'a dyn Fn() -> Result<(), String>);

/// Runs `checks` in order until one fails; the rest are reported as not run.
fn run_in_order(checks: &[Check<'_>]) -> Vec<CheckResult> {
    let mut failed = false;
    checks
        .iter()
        .map(|(name, check)| {
            let outcome = match failed {
                true => Err("not run: an earlier check failed".into()),
                false => check(),
            };
            failed |= outcome.is_err();
            CheckResult { name, outcome }
        })
        .collect()
}

fn attempts_count_per_run_and_step(a: &dyn StepAttempts) -> Result<(), String> {
    let counts = [
        a.begin_step("r1", 1),
        a.begin_step("r1", 1),
        a.begin_step("r1", 2),
        a.begin_step("r2", 1),
        a.begin_step("r1", 1),
    ];
    ensure!(
        counts == [1, 2, 1, 1, 3],
        "attempts {counts:?}; expected [1, 2, 1, 1, 3]"
    );
    Ok(())
}

/// The [`StepAttempts`] contract, on one fresh counter.
pub fn step_attempts(a: &dyn StepAttempts) -> Vec<CheckResult> {
    let checks: [Check<'_>; 1] = [("attempts_count_per_run_and_step", &|| {
        attempts_count_per_run_and_step(a)
    })];
    run_in_order(&checks)
}

fn e(err: crate::store::StoreError) -> String {
    format!("unexpected error: {err}")
}

fn the_first_answer_stands_and_sessions_are_apart(s: &dyn Suspension) -> Result<(), String> {
    let yes = Answer::Approval {
        approved: true,
        reason: None,
        answered_at: 7,
        decided_by: None,
    };
    let no = Answer::Approval {
        approved: false,
        reason: Some("no \"way\" é".into()),
        answered_at: 7,
        decided_by: Some(crate::store::Owner {
            subject: "jürgen".into(),
            tenant: Some("acme".into()),
        }),
    };
    ensure!(
        s.find_answer("s1", "c1").map_err(e)?.is_none(),
        "an unanswered call has no answer"
    );
    ensure!(
        s.answer("s1", "c1", &yes).map_err(e)? == AnswerOutcome::Stored,
        "the first answer is stored"
    );
    let second = s.answer("s1", "c1", &no).map_err(e)?;
    ensure!(
        second == AnswerOutcome::AlreadyAnswered(yes.clone()),
        "a second answer gets the first: {second:?}"
    );
    ensure!(
        s.find_answer("s1", "c1").map_err(e)? == Some(yes),
        "the first stands"
    );
    ensure!(
        s.answer("s2", "c1", &no).map_err(e)? == AnswerOutcome::Stored,
        "the same call id in another session is another call"
    );
    ensure!(
        s.find_answer("s2", "c1").map_err(e)? == Some(no),
        "answers round-trip, reasons included"
    );
    Ok(())
}

fn every_kind_of_answer_round_trips(s: &dyn Suspension) -> Result<(), String> {
    let answers = [
        Answer::ClientResult {
            result: json!({"a": [1, null, "x"]}),
            answered_at: 7,
        },
        Answer::ClientResult {
            result: json!(null),
            answered_at: 7,
        },
        Answer::ClientError {
            error: "e".into(),
            answered_at: 7,
        },
        Answer::Expired,
        Answer::ChildOutput {
            output: json!({"summary": "s"}),
        },
        Answer::ChildFailed {
            code: "subagent_failed".into(),
            error: "e".into(),
        },
    ];
    for (i, answer) in answers.iter().enumerate() {
        let call = format!("k{i}");
        s.answer("kinds", &call, answer).map_err(e)?;
        let back = s.find_answer("kinds", &call).map_err(e)?;
        ensure!(
            back.as_ref() == Some(answer),
            "{answer:?} came back as {back:?}"
        );
    }
    Ok(())
}

fn a_claim_is_never_taken_over(s: &dyn Suspension) -> Result<(), String> {
    let owners = [
        s.claim("run", 1, "c1", "p1").map_err(e)?,
        s.claim("run", 1, "c1", "p2").map_err(e)?,
        s.claim("run", 2, "c1", "p2").map_err(e)?,
    ];
    ensure!(owners == ["p1", "p1", "p2"], "owners {owners:?}");
    Ok(())
}

fn the_first_route_of_an_answer_stands(s: &dyn Suspension) -> Result<(), String> {
    ensure!(s.routed("x").map_err(e)?.is_none(), "nothing routed yet");
    ensure!(
        s.route("x", "child-a").map_err(e)?,
        "the first route is recorded"
    );
    ensure!(
        !s.route("x", "child-b").map_err(e)?,
        "a second route is refused"
    );
    ensure!(
        s.routed("x").map_err(e)?.as_deref() == Some("child-a"),
        "the first route stands"
    );
    Ok(())
}

/// What a session keeps is its own, replaced by a later value and gone once removed.
fn a_vault_keeps_per_session(s: &dyn Suspension) -> Result<(), String> {
    let kept = |session: &str| s.kept(session, "token").map_err(e);
    ensure!(kept("vault-a")?.is_none(), "nothing is kept at first");
    s.keep("vault-a", "token", Some("one")).map_err(e)?;
    s.keep("vault-a", "token", Some("two")).map_err(e)?;
    s.keep("vault-b", "token", Some("other")).map_err(e)?;
    ensure!(
        kept("vault-a")?.as_deref() == Some("two"),
        "the later value stands"
    );
    ensure!(
        kept("vault-b")?.as_deref() == Some("other"),
        "sessions keep apart"
    );
    s.keep("vault-a", "token", None).map_err(e)?;
    ensure!(kept("vault-a")?.is_none(), "a removed value is gone");
    ensure!(
        kept("vault-b")?.is_some(),
        "removing one session's leaves the other's"
    );
    Ok(())
}

/// The [`Suspension`] contract, on one fresh store.
pub fn suspension(s: &dyn Suspension) -> Vec<CheckResult> {
    let checks: [Check<'_>; 5] = [
        ("the_first_answer_stands_and_sessions_are_apart", &|| {
            the_first_answer_stands_and_sessions_are_apart(s)
        }),
        ("every_kind_of_answer_round_trips", &|| {
            every_kind_of_answer_round_trips(s)
        }),
        ("a_claim_is_never_taken_over", &|| {
            a_claim_is_never_taken_over(s)
        }),
        ("the_first_route_of_an_answer_stands", &|| {
            the_first_route_of_an_answer_stands(s)
        }),
        ("a_vault_keeps_per_session", &|| {
            a_vault_keeps_per_session(s)
        }),
    ];
    run_in_order(&checks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{MemoryAttempts, MemoryStreamLog, MemorySuspension};

    fn all_pass(results: Vec<CheckResult>) {
        for r in results {
            assert_eq!(r.outcome, Ok(()), "{}", r.name);
        }
    }

    #[test]
    fn the_memory_journal_passes_every_suite() {
        all_pass(stream_log(&MemoryStreamLog::new()));
        all_pass(step_attempts(&MemoryAttempts::default()));
        all_pass(suspension(&MemorySuspension::default()));
    }
}
