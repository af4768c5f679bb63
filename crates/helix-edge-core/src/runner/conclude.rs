//! What a step leads to, decided from plain values once its calls are done
//! ([`conclude_step`]): an answer that stopped in error fails the run (a cut-off one
//! owing an output is nudged); an output (`finish_with`, `__finish__`) completes it —
//! once the sub-agents the step started have ended — and skips the step's other calls;
//! pending calls suspend it; a text answer completes it, or, for an agent that owes an
//! output, is the output when it parses into the schema and otherwise gets a bounded
//! corrective nudge; calls go on to the next step. Whenever the run would go on, the
//! agent's `stop_when` is asked first. `__finish__` calls are checked here too ([`finish_output`]).

use crate::agent::{Agent, FINISH_TOOL, StepSummary};
use crate::error::{Coded, ErrorInfo, ProviderError, ToolError};
use crate::message::{Message, ToolCall};
use crate::store::{PendingCall, PendingKind, RunRecord};
use serde_json::{Map, Value, json};

/// The text of the corrective nudge sent when a required output is missing.
pub(crate) const OUTPUT_NUDGE: &str =
    "You must finish by calling the __finish__ tool with your final answer as its arguments.";

/// The nudge sent when an answer owing an output was cut off at the token limit.
pub(crate) const MAX_TOKENS_NUDGE: &str = "Your answer was cut off at the output token limit. \
    Call the __finish__ tool now, with a shorter final answer as its arguments.";

/// What the step decided for the run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// Another model step follows.
    Continue,
    /// The run waits on these calls.
    Suspend(Vec<PendingCall>),
    /// The run completed, with its output if it has one.
    Complete(Option<Value>),
    /// The run failed.
    Fail(ErrorInfo),
}

/// What a step came to, once its calls ran.
pub(crate) struct Stepped<'a> {
    /// The error the model's answer stopped with, if it did not finish.
    pub stopped: Option<ProviderError>,
    /// The output a `finish_with` or `__finish__` call gave.
    pub output: Option<Value>,
    /// The calls that wait on a human, a client or another session.
    pub pending: Vec<PendingCall>,
    /// The model's text.
    pub text: &'a str,
    /// The model's calls.
    pub calls: &'a [ToolCall],
    /// Their results so far, in call order (`None`: pending, deferred or not run).
    pub results: &'a [Option<Message>],
    /// The state after the step's writes.
    pub state: &'a Value,
}

/// A step's conclusion: what the run does next, and what the step adds.
#[derive(Debug, PartialEq)]
pub(crate) struct Conclusion {
    /// What the run does next.
    pub outcome: Outcome,
    /// A corrective nudge (a user message after the results); it spends one of the
    /// run's nudges.
    pub nudge: Option<Message>,
    /// The calls that end as `tool_skipped` because the run finished first.
    pub skipped: Vec<usize>,
    /// The output the run completes with once the sub-agents it waits on have ended.
    pub deferred_output: Option<Value>,
}

impl Conclusion {
    fn of(outcome: Outcome) -> Self {
        Self {
            outcome,
            nudge: None,
            skipped: Vec::new(),
            deferred_output: None,
        }
    }

    /// The run goes on after a nudge with `text`.
    fn nudged(text: &str) -> Self {
        Self {
            nudge: Some(Message::User {
                content: text.into(),
                attachments: Vec::new(),
                metadata: Some(Map::from_iter([("nudge".to_string(), json!(true))])),
            }),
            ..Self::of(Outcome::Continue)
        }
    }
}

/// Concludes a step of `agent`'s run `run`, which may spend `max_nudges` nudges. A step
/// that would go on to another model call — after calls, or nudged after text — asks
/// the agent's `stop_when` first.
pub(crate) fn conclude_step(
    agent: &Agent,
    run: &RunRecord,
    max_nudges: u32,
    step: Stepped<'_>,
) -> Conclusion {
    let (text, calls, results, state) = (step.text, step.calls, step.results, step.state);
    let conclusion = decide(agent, run, max_nudges, step);
    if conclusion.outcome != Outcome::Continue {
        return conclusion;
    }
    let Some(stop_when) = agent.stop_when() else {
        return conclusion;
    };
    let results: Vec<Message> = results.iter().flatten().cloned().collect();
    let summary = StepSummary {
        run_steps: run.step_count + 1,
        text,
        tool_calls: calls,
        results: &results,
        state,
    };
    match (stop_when(&summary), agent.output()) {
        (false, _) => conclusion,
        (true, None) => Conclusion::of(Outcome::Complete(None)),
        (true, Some(_)) => Conclusion::of(Outcome::Fail(ErrorInfo {
            code: "output_missing".into(),
            message: format!("The agent's stop_when ended the run before {FINISH_TOOL} was called"),
            retryable: false,
        })),
    }
}

/// What the step leads to, before `stop_when` is asked.
fn decide(agent: &Agent, run: &RunRecord, max_nudges: u32, step: Stepped<'_>) -> Conclusion {
    let nudges_left = run.nudges < max_nudges;
    if let Some(stopped) = step.stopped {
        // A cut-off answer of an agent that owes an output is nudged; everything else
        // fails the run with the classified error.
        let owes = agent.output().is_some();
        return match (stopped, owes && nudges_left) {
            (ProviderError::MaxTokens, true) => Conclusion::nudged(MAX_TOKENS_NUDGE),
            (stopped, _) => Conclusion::of(Outcome::Fail(ErrorInfo::of(&stopped))),
        };
    }
    if let Some(output) = step.output {
        // The run ends: gated and deferred calls of the same step never run, but its
        // sub-agents always do, and the run completes with this output once they have
        // ended.
        let children: Vec<PendingCall> = step
            .pending
            .into_iter()
            .filter(|p| p.kind == PendingKind::Child)
            .collect();
        let skipped = (0..step.calls.len())
            .filter(|&i| step.results.get(i).is_none_or(Option::is_none))
            .filter(|&i| !children.iter().any(|p| p.tool_call_id == step.calls[i].id))
            .collect();
        let (outcome, deferred_output) = match children.is_empty() {
            true => (Outcome::Complete(Some(output)), None),
            false => (Outcome::Suspend(children), Some(output)),
        };
        return Conclusion {
            skipped,
            deferred_output,
            ..Conclusion::of(outcome)
        };
    }
    if !step.pending.is_empty() {
        return Conclusion::of(Outcome::Suspend(step.pending));
    }
    if step.calls.is_empty() {
        return after_text(agent, run, nudges_left, step.text);
    }
    // A step of calls goes on to the next model call.
    Conclusion::of(Outcome::Continue)
}

/// A text answer (no calls): the run completes, with the text as the output when an
/// owed output parses from it; otherwise the model is nudged, within the budget.
fn after_text(agent: &Agent, run: &RunRecord, nudges_left: bool, text: &str) -> Conclusion {
    let Some(output) = agent.output() else {
        return Conclusion::of(Outcome::Complete(None));
    };
    if let Some(value) = output.in_text(text) {
        return Conclusion::of(Outcome::Complete(Some(value)));
    }
    if nudges_left {
        return Conclusion::nudged(OUTPUT_NUDGE);
    }
    Conclusion::of(Outcome::Fail(ErrorInfo {
        code: "output_missing".into(),
        message: format!(
            "The model answered in text {} times instead of calling {FINISH_TOOL}",
            run.nudges + 1
        ),
        retryable: true,
    }))
}

/// Checks a `__finish__` call's arguments against the output schema; the first valid
/// one is the output. Invalid output goes back to the model as a tool error it can fix.
pub(crate) fn finish_output(agent: &Agent, call: &ToolCall, output: &mut Option<Value>) -> Message {
    let accepted = match agent.output() {
        Some(spec) => spec.accept(&call.arguments),
        None => Ok(call.arguments.clone()),
    };
    match accepted {
        Ok(value) => {
            output.get_or_insert(value);
            Message::tool_result(call, json!({"accepted": true}))
        }
        Err(reason) => {
            let err = ToolError::InputInvalid {
                tool: FINISH_TOOL.into(),
                reason,
            };
            Message::tool_error(call, err.code(), &err.to_string())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chunk::RunStatus;
    use crate::model::Usage;

    fn run(nudges: u32) -> RunRecord {
        RunRecord {
            run_id: "r".into(),
            turn: 1,
            status: RunStatus::Running,
            step_count: 1,
            started_at: 0,
            completed_at: None,
            error: None,
            usage: Usage::default(),
            usage_by_model: Default::default(),
            nudges,
            deferred_output: None,
            input_at: 0,
            options: None,
            trace: None,
        }
    }

    fn plain() -> Agent {
        Agent::builder("a").build().unwrap()
    }

    fn owing() -> Agent {
        let schema = json!({"type": "object", "properties": {"summary": {"type": "string"}},
            "required": ["summary"]});
        Agent::builder("a").output_schema(schema).build().unwrap()
    }

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "t".into(),
            arguments: json!({}),
        }
    }

    fn pending(id: &str, kind: PendingKind) -> PendingCall {
        PendingCall {
            tool_call_id: id.into(),
            tool_name: "t".into(),
            arguments: json!({}),
            kind,
            deadline: None,
            since: 0,
            output_path: None,
            approvers: None,
            request: None,
        }
    }

    fn step<'a>(
        text: &'a str,
        calls: &'a [ToolCall],
        results: &'a [Option<Message>],
    ) -> Stepped<'a> {
        Stepped {
            stopped: None,
            output: None,
            pending: Vec::new(),
            text,
            calls,
            results,
            state: &Value::Null,
        }
    }

    #[test]
    fn a_text_answer_completes_the_run() {
        let c = conclude_step(&plain(), &run(0), 2, step("done", &[], &[]));
        assert_eq!(c, Conclusion::of(Outcome::Complete(None)));
    }

    #[test]
    fn a_text_answer_owing_an_output_is_the_output_or_a_nudge_then_a_failure() {
        let text = r#"{"summary": "s"}"#;
        let c = conclude_step(&owing(), &run(0), 2, step(text, &[], &[]));
        assert_eq!(c.outcome, Outcome::Complete(Some(json!({"summary": "s"}))));
        let c = conclude_step(&owing(), &run(1), 2, step("prose", &[], &[]));
        assert_eq!(c.outcome, Outcome::Continue);
        let nudge = c.nudge.expect("a nudge");
        assert!(matches!(&nudge, Message::User { content, .. } if content == OUTPUT_NUDGE));
        let c = conclude_step(&owing(), &run(2), 2, step("prose", &[], &[]));
        let Outcome::Fail(e) = c.outcome else {
            panic!("out of nudges")
        };
        assert_eq!(e.code, "output_missing");
        assert!(e.message.contains("3 times"), "{}", e.message);
        assert_eq!(c.nudge, None);
    }

    #[test]
    fn an_answer_that_stopped_in_error_fails_unless_a_cut_off_owes_an_output() {
        let stopped = |e| Stepped {
            stopped: Some(e),
            ..step("", &[], &[])
        };
        let c = conclude_step(&plain(), &run(0), 2, stopped(ProviderError::MaxTokens));
        assert_eq!(
            c.outcome,
            Outcome::Fail(ErrorInfo::of(&ProviderError::MaxTokens))
        );
        let c = conclude_step(&owing(), &run(0), 2, stopped(ProviderError::MaxTokens));
        assert_eq!(c.outcome, Outcome::Continue);
        assert!(
            matches!(&c.nudge, Some(Message::User { content, .. }) if content == MAX_TOKENS_NUDGE)
        );
        let c = conclude_step(&owing(), &run(2), 2, stopped(ProviderError::MaxTokens));
        assert!(matches!(c.outcome, Outcome::Fail(_)), "no nudges left");
        let c = conclude_step(
            &owing(),
            &run(0),
            2,
            stopped(ProviderError::ContentFiltered),
        );
        assert_eq!(
            c.outcome,
            Outcome::Fail(ErrorInfo::of(&ProviderError::ContentFiltered))
        );
    }

    #[test]
    fn an_output_skips_the_steps_other_calls_but_waits_for_its_sub_agents() {
        let calls = [call("a"), call("b"), call("k"), call("f")];
        let done = Some(Message::tool_result(&calls[0], json!({})));
        let finished = Some(Message::tool_result(&calls[3], json!({})));
        let results = [done, None, None, finished];
        let with = |pending| Stepped {
            output: Some(json!({"x": 1})),
            pending,
            ..step("", &calls, &results)
        };
        let c = conclude_step(
            &plain(),
            &run(0),
            2,
            with(vec![pending("b", PendingKind::Approval)]),
        );
        assert_eq!(c.outcome, Outcome::Complete(Some(json!({"x": 1}))));
        assert_eq!(c.skipped, vec![1, 2], "the approval and the unrun call");
        let child = pending("k", PendingKind::Child);
        let c = conclude_step(
            &plain(),
            &run(0),
            2,
            with(vec![pending("b", PendingKind::Approval), child.clone()]),
        );
        assert_eq!(c.outcome, Outcome::Suspend(vec![child]));
        assert_eq!(c.skipped, vec![1], "the sub-agent runs");
        assert_eq!(c.deferred_output, Some(json!({"x": 1})));
    }

    #[test]
    fn pending_calls_suspend_and_other_calls_go_on_unless_stop_when_stops() {
        let calls = [call("a")];
        let results = [Some(Message::tool_result(&calls[0], json!({})))];
        let waiting = Stepped {
            pending: vec![pending("a", PendingKind::Client)],
            ..step("", &calls, &[None])
        };
        let c = conclude_step(&plain(), &run(0), 2, waiting);
        assert!(matches!(c.outcome, Outcome::Suspend(p) if p.len() == 1));
        let c = conclude_step(&plain(), &run(0), 2, step("", &calls, &results));
        assert_eq!(c.outcome, Outcome::Continue);
        let stops = Agent::builder("a")
            .stop_when(|s| s.run_steps >= 2 && s.results.len() == 1)
            .build()
            .unwrap();
        let c = conclude_step(&stops, &run(0), 2, step("", &calls, &results));
        assert_eq!(c.outcome, Outcome::Complete(None), "its second step");
        let first = RunRecord {
            step_count: 0,
            ..run(0)
        };
        let c = conclude_step(&stops, &first, 2, step("", &calls, &results));
        assert_eq!(
            c.outcome,
            Outcome::Continue,
            "the predicate sees the run's steps"
        );
    }

    #[test]
    fn stop_when_is_asked_after_a_nudged_text_step_too_and_never_when_the_run_ends() {
        let asked = std::rc::Rc::new(std::cell::Cell::new(0));
        let seen = asked.clone();
        let owes = Agent::builder("a")
            .output_schema(json!({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}))
            .stop_when(move |s| {
                seen.set(seen.get() + 1);
                s.tool_calls.is_empty() && s.text.contains("give up")
            })
            .build()
            .unwrap();
        // A text answer that is not the output would be nudged: the predicate decides.
        let c = conclude_step(&owes, &run(0), 2, step("thinking more", &[], &[]));
        assert!(c.nudge.is_some(), "not stopped: nudged");
        let c = conclude_step(&owes, &run(0), 2, step("I give up", &[], &[]));
        assert!(
            matches!(&c.outcome, Outcome::Fail(e) if e.code == "output_missing" && e.message.contains("stop_when")),
            "{:?}",
            c.outcome
        );
        assert_eq!(asked.get(), 2);
        // A text answer that is the output ends the run: nothing to ask.
        let c = conclude_step(&owes, &run(0), 2, step(r#"{"x": 1}"#, &[], &[]));
        assert_eq!(c.outcome, Outcome::Complete(Some(json!({"x": 1}))));
        assert_eq!(asked.get(), 2, "not asked when the run ends anyway");
    }
}
