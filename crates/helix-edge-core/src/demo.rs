//! The `demo` model (SPEC §6): deterministic and offline, so the default agent works
//! with no key. It reads simple intents from the latest user message and calls the
//! reference agents' tools, then answers in text once the tool results are in.
//!
//! Intents (case-insensitive; several can be joined with `;`):
//! `delete <path>`, `note <text>`, `what time is it`, `email a,b,c[ about <subject>]`,
//! `ask me something`, `research <topic>`, `ask remote <task>`, `process order <id>` (a
//! three-call plan); with
//! persistent children, `hire <name> to research <topic>`, `tell <name> <message>`,
//! `helpers`, `status of <name>`, `dismiss <name>`.
//!
//! For agents of your own ([`script`]): a message of `/call <tool> {json}` lines calls
//! those tools, and a script in `LLM_SCRIPT` answers the messages it names. Anything
//! else gets a short help text naming the agent's tools.

use crate::agent::FINISH_TOOL;
use crate::error::ProviderError;
use crate::message::{Message, ToolCall};
use crate::model::{Delta, Model, ModelRequest, ModelTurn, StopReason, ToolSpec, Usage};
use crate::tool::OUTPUT_PATH;
use futures::future::LocalBoxFuture;
use script::DevScript;
use serde_json::{Value, json};

pub mod script;

/// The built-in deterministic model.
#[derive(Debug, Default, Clone)]
pub struct DemoModel {
    script: Option<DevScript>,
}

const HELP: &str = "Demo model. Try: note buy milk; what time is it; delete /tmp/x; email a,b,c,d; ask me something";

fn has(tools: &[ToolSpec], name: &str) -> bool {
    tools.iter().any(|t| t.name == name)
}

/// The calls one clause of the user's message asks for.
fn intent(clause: &str, tools: &[ToolSpec]) -> Option<(&'static str, Value)> {
    let text = clause.trim();
    let lower = text.to_ascii_lowercase();
    let rest = |prefix: &str| text[prefix.len()..].trim().to_string();
    if lower.starts_with("ask remote ") {
        let task = rest("ask remote ");
        return has(tools, "ask_remote").then(|| ("ask_remote", json!({ "task": task })));
    }
    if let Some(prefix) = ["delete ", "remove "]
        .iter()
        .find(|p| lower.starts_with(*p))
    {
        return has(tools, "delete_file").then(|| ("delete_file", json!({ "path": rest(prefix) })));
    }
    if let Some(prefix) = ["add note ", "note ", "remember "]
        .iter()
        .find(|p| lower.starts_with(*p))
    {
        return has(tools, "add_note").then(|| ("add_note", json!({ "text": rest(prefix) })));
    }
    if lower.starts_with("email ") || lower.starts_with("send email ") {
        let body = lower
            .trim_start_matches("send ")
            .trim_start_matches("email ")
            .to_string();
        let (to, subject) = match body.split_once(" about ") {
            Some((to, subject)) => (to.to_string(), subject.trim().to_string()),
            None => (body, "Hello".to_string()),
        };
        let to: Vec<String> = to
            .split(',')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
        let args = json!({ "to": to, "subject": subject, "body": format!("Sent by the helix-edge demo: {subject}.") });
        return has(tools, "send_email").then_some(("send_email", args));
    }
    if lower.contains("time") {
        return has(tools, "get_time").then(|| ("get_time", json!({})));
    }
    if lower.starts_with("ask ") {
        let question = "What would you like me to do next?";
        return has(tools, "ask_user").then(|| ("ask_user", json!({ "question": question })));
    }
    if let Some(call) = companion_intent(text, &lower, tools) {
        return Some(call);
    }
    if let Some(prefix) = ["research "].iter().find(|p| lower.starts_with(*p)) {
        return has(tools, "research").then(|| ("research", json!({ "topic": rest(prefix) })));
    }
    None
}

/// The companion calls of a lead with researcher helpers (the `team` agent).
fn companion_intent(text: &str, lower: &str, tools: &[ToolSpec]) -> Option<(&'static str, Value)> {
    if !has(tools, "companion__spawnAgent") {
        return None;
    }
    let word = |s: &str| s.split_whitespace().next().unwrap_or_default().to_string();
    if let Some(rest) = lower.strip_prefix("hire ") {
        let (name, topic) = rest.split_once(" to research ")?;
        let topic = text[text.len() - topic.len()..].trim();
        let args = json!({ "agentType": "researcher", "name": name.trim(), "message": topic });
        return Some(("companion__spawnAgent", args));
    }
    if lower.starts_with("tell ") {
        // `lower` is `text` with ASCII lowercased: the same byte offsets.
        let rest = text["tell ".len()..].trim_start();
        let (name, message) = rest.split_once(' ').unwrap_or((rest, ""));
        let args = json!({ "name": name.to_ascii_lowercase(), "message": message.trim() });
        return Some(("companion__sendMessage", args));
    }
    if lower == "helpers" {
        return Some(("companion__listChildren", json!({})));
    }
    if let Some(rest) = lower.strip_prefix("status of ") {
        return Some(("companion__getChildStatus", json!({ "name": word(rest) })));
    }
    if let Some(rest) = lower.strip_prefix("dismiss ") {
        return Some(("companion__terminateChild", json!({ "name": word(rest) })));
    }
    None
}

/// `process order <id>`: one step laying out fetch → check → store as a plan, each
/// result stored in the state and passed on by reference (the `orders` agent).
fn plan_intent(clause: &str, tools: &[ToolSpec]) -> Option<Vec<(&'static str, Value)>> {
    let stores = |name: &str| {
        let spec = tools.iter().find(|t| t.name == name);
        spec.is_some_and(|t| t.input_schema["properties"].get(OUTPUT_PATH).is_some())
    };
    if !stores("fetch_order") {
        return None; // no tool could store what the plan passes on
    }
    let id = clause.trim().to_ascii_lowercase();
    let id = id.strip_prefix("process order ")?.trim().to_string();
    let all = ["fetch_order", "check_order", "store_order"];
    if !all.iter().all(|t| has(tools, t)) {
        return None;
    }
    Some(vec![
        ("fetch_order", json!({ "id": id, "_outputPath": "/order" })),
        (
            "check_order",
            json!({ "orderId": "†state.order.id", "total": "†state.order.total", "_outputPath": "/check" }),
        ),
        (
            "store_order",
            json!({ "orderId": "†state.order.id", "total": "†state.order.total", "checkedId": "†state.check.orderId", "passed": "†state.check.ok", "_outputPath": "/archive/-" }),
        ),
    ])
}

/// Text describing the tool results after the last assistant message.
fn summarize(messages: &[Message]) -> String {
    let results: Vec<String> = messages
        .iter()
        .rev()
        .take_while(|m| matches!(m, Message::Tool { .. }))
        .filter_map(|m| match m {
            Message::Tool {
                tool_name,
                content,
                is_error: false,
                ..
            } if tool_name != FINISH_TOOL => Some(format!("{tool_name} returned {content}")),
            Message::Tool {
                tool_name, content, ..
            } if tool_name != FINISH_TOOL => {
                let error = content
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("an error");
                Some(format!("{tool_name} failed: {error}"))
            }
            _ => None,
        })
        .collect();
    let mut results = results;
    results.reverse();
    format!("Done. {}.", results.join("; "))
}

/// A `__finish__` call delivering `summary` as the structured output.
fn finish(request: &ModelRequest<'_>, summary: String) -> ToolCall {
    ToolCall {
        id: format!("demo-{}", request.messages.len()),
        name: FINISH_TOOL.into(),
        arguments: json!({ "summary": summary }),
    }
}

fn stream(text: &str, on_delta: &mut dyn FnMut(Delta)) {
    if text.is_empty() {
        return;
    }
    for (i, word) in text.split(' ').enumerate() {
        on_delta(Delta::Text(if i == 0 {
            word.to_string()
        } else {
            format!(" {word}")
        }));
    }
}

impl DemoModel {
    /// The demo model following `script` (`LLM_SCRIPT`), if there is one; a script
    /// that does not parse leaves the model not configured, saying why.
    pub fn with_script(script: Option<&str>) -> Result<Self, ProviderError> {
        let script = script.map(DevScript::parse).transpose();
        let script = script.map_err(ProviderError::NotConfigured)?;
        Ok(Self { script })
    }

    fn answer(&self, request: &ModelRequest<'_>) -> ModelTurn {
        let wants_output = has(&request.tools, FINISH_TOOL);
        let last_user = request.messages.iter().rev().find_map(|m| match m {
            Message::User { content, .. } if !m.is_nudge() => Some(content.as_str()),
            _ => None,
        });
        // A message of `/call` lines is answered by its calls alone, never by the script.
        let scripted = last_user
            .filter(|m| !m.trim_start().starts_with("/call"))
            .and_then(|m| self.script.as_ref()?.turn(m));
        let after_tools = matches!(request.messages.last(), Some(Message::Tool { .. }));
        let mut turn = ModelTurn {
            usage: Usage {
                input_tokens: 1,
                output_tokens: 1,
                ..Usage::default()
            },
            ..ModelTurn::default()
        };
        if after_tools
            || wants_output
                && !request
                    .messages
                    .last()
                    .is_some_and(|m| matches!(m, Message::User { .. }) && !m.is_nudge())
        {
            if let Some(done) = scripted.and_then(|t| scripted_answer(request, t, wants_output)) {
                return done;
            }
            let summary = summarize(request.messages);
            if wants_output {
                let topic = last_user.unwrap_or_default();
                turn.tool_calls = vec![finish(request, format!("Findings on {topic}: {summary}"))];
                turn.stop = StopReason::ToolUse;
            } else {
                turn.text = summary;
            }
            return turn;
        }
        let message = last_user.unwrap_or_default();
        let calls = match (script::slash_calls(message, &request.tools), scripted) {
            (Some(calls), _) => calls,
            (None, Some(t)) if !t.calls.is_empty() => script::turn_calls(t, &request.tools),
            (None, Some(t)) => match scripted_answer(request, t, wants_output) {
                Some(done) => return done,
                None => Ok(Vec::new()),
            },
            (None, None) => Ok(self.intents(request, message)),
        };
        let calls = match calls {
            Ok(calls) => calls,
            Err(e) => {
                turn.text = format!("The demo model could not follow that: {e}.");
                return turn;
            }
        };
        turn.tool_calls = calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, arguments))| ToolCall {
                id: format!("demo-{}-{i}", request.messages.len()),
                name,
                arguments,
            })
            .collect();
        if !turn.tool_calls.is_empty() {
            turn.stop = StopReason::ToolUse;
        } else if wants_output {
            let topic = last_user.unwrap_or_default();
            turn.tool_calls = vec![finish(
                request,
                format!("Findings on {topic}: nothing further to report."),
            )];
            turn.stop = StopReason::ToolUse;
        } else {
            turn.text = self.help(message, &request.tools);
        }
        turn
    }

    /// The reference agents' intents in `message` (several joined with `;`).
    fn intents(&self, request: &ModelRequest<'_>, message: &str) -> Vec<(String, Value)> {
        // A sub-agent's first message is its input as JSON: `{"topic": "..."}` (or a
        // remote one's `{"task": "..."}`) reads as that text.
        let topic = serde_json::from_str::<Value>(message).ok().and_then(|v| {
            let text = v.get("topic").or_else(|| v.get("task"));
            text.and_then(Value::as_str).map(str::to_string)
        });
        let clauses = topic.as_deref().unwrap_or(message).split(';');
        clauses
            .flat_map(|c| {
                plan_intent(c, &request.tools)
                    .unwrap_or_else(|| intent(c, &request.tools).into_iter().collect())
            })
            .map(|(name, args)| (name.to_string(), args))
            .collect()
    }

    /// What to say to a message nothing answers.
    fn help(&self, message: &str, tools: &[ToolSpec]) -> String {
        let call = format!(
            "call a tool with `/call <tool> {{json}}` (this agent's tools: {})",
            script::tool_list(tools)
        );
        match &self.script {
            Some(script) => format!(
                "The demo model's script (LLM_SCRIPT) has no turn for \"{message}\": its turns answer {}. Or {call}.",
                script.cues().join(", ")
            ),
            None => format!("{HELP}. Or {call}, or script the answers in LLM_SCRIPT."),
        }
    }
}

/// A script turn's answer, when it has one for this moment: its output for an agent
/// that finishes with one, else its reply.
fn scripted_answer(
    request: &ModelRequest<'_>,
    t: &script::Turn,
    wants_output: bool,
) -> Option<ModelTurn> {
    let mut turn = ModelTurn {
        usage: Usage {
            input_tokens: 1,
            output_tokens: 1,
            ..Usage::default()
        },
        ..ModelTurn::default()
    };
    match (&t.output, &t.reply) {
        (Some(output), _) if wants_output => {
            turn.tool_calls = vec![ToolCall {
                id: format!("demo-{}", request.messages.len()),
                name: FINISH_TOOL.into(),
                arguments: output.clone(),
            }];
            turn.stop = StopReason::ToolUse;
        }
        (_, Some(reply)) => turn.text = reply.clone(),
        _ => return None,
    }
    Some(turn)
}

impl Model for DemoModel {
    fn generate<'a>(
        &'a self,
        request: ModelRequest<'a>,
        on_delta: &'a mut dyn FnMut(Delta),
    ) -> LocalBoxFuture<'a, Result<ModelTurn, ProviderError>> {
        if let Err(e) = request.check() {
            return Box::pin(async move { Err(e) });
        }
        let turn = self.answer(&request);
        stream(&turn.text, on_delta);
        Box::pin(async move { Ok(turn) })
    }

    fn name(&self, _settings: &crate::model::ModelSettings) -> crate::model::ModelName {
        crate::model::ModelName {
            system: "demo".into(),
            model: "demo".into(),
        }
    }
}
