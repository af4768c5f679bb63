//! What a step leads to, once its calls are done: an answer that stopped in error fails
//! the run (a cut-off one owing an output is nudged); a text answer completes it, or,
//! for an agent that owes an output, is the output when it parses into the schema and
//! otherwise gets a bounded corrective nudge; calls go on to the next step unless the
//! agent's `stop_when` says the run stops. `__finish__` calls are checked here too.

use super::commit::Outcome;
use super::{Live, Runner};
use crate::agent::{Agent, FINISH_TOOL, StepSummary};
use crate::error::{Coded, ErrorInfo, ProviderError, ToolError};
use crate::host::Level;
use crate::host::LogValue::Str;
use crate::message::{Message, ToolCall};
use crate::store::{SessionHead, Store};
use serde_json::{Map, Value, json};

/// The text of the corrective nudge sent when a required output is missing.
pub(crate) const OUTPUT_NUDGE: &str =
    "You must finish by calling the __finish__ tool with your final answer as its arguments.";

/// The nudge sent when an answer owing an output was cut off at the token limit.
pub(crate) const MAX_TOKENS_NUDGE: &str = "Your answer was cut off at the output token limit. \
    Call the __finish__ tool now, with a shorter final answer as its arguments.";

/// A step whose calls all ended without suspending or finishing the run.
pub(crate) struct Stepped<'a> {
    pub text: &'a str,
    pub calls: &'a [ToolCall],
    pub results: &'a [Option<Message>],
    pub state: &'a Value,
}

impl<S: Store> Runner<S> {
    /// What an answer that ended with an error stop reason leads to: a cut-off answer of
    /// an agent that owes an output is nudged (within the nudge budget); everything else
    /// fails the run with the classified error.
    pub(crate) fn after_error_stop(
        &self,
        live: &Live,
        agent: &Agent,
        head: &mut SessionHead,
        results: &mut Vec<Option<Message>>,
        stopped: ProviderError,
    ) -> Outcome {
        let fields = [("code", Str(stopped.code()))];
        self.log(live, Level::Warn, "model_stopped_in_error", &fields);
        let recoverable = matches!(stopped, ProviderError::MaxTokens)
            && agent.output().is_some()
            && self.nudge(head, results, MAX_TOKENS_NUDGE);
        if recoverable {
            Outcome::Continue
        } else {
            Outcome::Fail(ErrorInfo::of(&stopped))
        }
    }

    /// Appends a corrective nudge as a user message, if the run has nudges left.
    fn nudge(
        &self,
        head: &mut SessionHead,
        results: &mut Vec<Option<Message>>,
        text: &str,
    ) -> bool {
        if head.run.nudges >= self.config.max_output_nudges {
            return false;
        }
        head.run.nudges += 1;
        results.push(Some(Message::User {
            content: text.into(),
            attachments: Vec::new(),
            metadata: Some(Map::from_iter([("nudge".to_string(), json!(true))])),
        }));
        true
    }

    /// A text answer (no calls): the run completes, with the text as the output when
    /// an owed output parses from it; otherwise the model is nudged, within the budget.
    pub(crate) fn after_text(
        &self,
        agent: &Agent,
        head: &mut SessionHead,
        results: &mut Vec<Option<Message>>,
        text: &str,
    ) -> Outcome {
        let Some(output) = agent.output() else {
            return Outcome::Complete(None);
        };
        if let Some(value) = output.in_text(text) {
            return Outcome::Complete(Some(value));
        }
        if self.nudge(head, results, OUTPUT_NUDGE) {
            return Outcome::Continue;
        }
        Outcome::Fail(ErrorInfo {
            code: "output_missing".into(),
            message: format!(
                "The model answered in text {} times instead of calling {FINISH_TOOL}",
                head.run.nudges + 1
            ),
            retryable: true,
        })
    }

    /// A step of calls goes on to the next model call, unless `stop_when` stops the run.
    pub(crate) fn after_calls(
        &self,
        agent: &Agent,
        head: &SessionHead,
        step: Stepped<'_>,
    ) -> Outcome {
        let Some(stop_when) = agent.stop_when() else {
            return Outcome::Continue;
        };
        let results: Vec<Message> = step.results.iter().flatten().cloned().collect();
        let summary = StepSummary {
            run_steps: head.run.step_count + 1,
            text: step.text,
            tool_calls: step.calls,
            results: &results,
            state: step.state,
        };
        match (stop_when(&summary), agent.output()) {
            (false, _) => Outcome::Continue,
            (true, None) => Outcome::Complete(None),
            (true, Some(_)) => Outcome::Fail(ErrorInfo {
                code: "output_missing".into(),
                message: format!(
                    "The agent's stop_when ended the run before {FINISH_TOOL} was called"
                ),
                retryable: false,
            }),
        }
    }

    /// Checks a `__finish__` call's arguments against the output schema; the first
    /// valid one is the output. Invalid output goes back to the model as a tool error
    /// it can fix.
    pub(crate) fn finish_output(
        &self,
        agent: &Agent,
        call: &ToolCall,
        output: &mut Option<Value>,
    ) -> Message {
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
}
