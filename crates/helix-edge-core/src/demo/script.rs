//! What the `demo` model does for agents of your own: a script of turns (the var
//! `LLM_SCRIPT`) and the `/call` syntax, so that any agent runs locally with no key.
//!
//! A script is a JSON list of turns, tried in order against the newest user message
//! (ASCII letters case-insensitive: the turn's `user` text anywhere in it):
//!
//! ```json
//! [{"user": "cancel", "calls": [{"tool": "cancel_order", "args": {"order_id": "A-1042"}}],
//!   "reply": "Order A-1042 is cancelled."},
//!  {"user": "hello", "reply": "Hello! Ask me to cancel an order."}]
//! ```
//!
//! A turn's `calls` run in one step (in parallel, approvals and client tools as
//! anywhere); once their results are in, the model answers `reply` (or, without one,
//! what each tool returned). For an agent with a typed output, `output` is what it
//! finishes with. A message of lines `/call <tool> {json}` calls those tools directly,
//! whatever the script says.

use crate::model::ToolSpec;
use serde::Deserialize;
use serde_json::{Map, Value};

/// One turn of a script.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// Text the newest user message contains (ASCII letters case-insensitive) for this turn to answer.
    pub user: String,
    /// The tools to call, in one step.
    #[serde(default)]
    pub calls: Vec<Call>,
    /// The answer: at once without calls, after their results with them.
    #[serde(default)]
    pub reply: Option<String>,
    /// The structured output to finish with, for an agent with a typed output.
    #[serde(default)]
    pub output: Option<Value>,
}

/// One tool call of a turn.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Call {
    /// The tool's name.
    pub tool: String,
    /// Its arguments (an object; `{}` when left out).
    #[serde(default = "empty_object")]
    pub args: Value,
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

/// A parsed, checked script.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DevScript {
    turns: Vec<Turn>,
}

impl DevScript {
    /// Parses `LLM_SCRIPT`; the error says what is wrong and where.
    pub fn parse(text: &str) -> Result<Self, String> {
        let turns: Vec<Turn> = serde_json::from_str(text).map_err(|e| {
            format!("LLM_SCRIPT is not a list of turns ({e}); each turn is {{\"user\": \"…\", \"calls\": [{{\"tool\": \"…\", \"args\": {{…}}}}], \"reply\": \"…\"}}")
        })?;
        for (i, turn) in turns.iter().enumerate() {
            if turn.user.trim().is_empty() {
                return Err(format!("LLM_SCRIPT turn {i}: `user` is empty"));
            }
            if let Some(call) = turn.calls.iter().find(|c| !c.args.is_object()) {
                return Err(format!(
                    "LLM_SCRIPT turn {i}: the arguments of `{}` are not a JSON object",
                    call.tool
                ));
            }
        }
        Ok(Self { turns })
    }

    /// The first turn whose `user` text the message contains.
    pub fn turn(&self, message: &str) -> Option<&Turn> {
        let message = message.to_ascii_lowercase();
        let said = |t: &&Turn| message.contains(&t.user.trim().to_ascii_lowercase());
        self.turns.iter().find(said)
    }

    /// The `user` texts the script answers, for a message that matched none.
    pub fn cues(&self) -> Vec<&str> {
        self.turns.iter().map(|t| t.user.trim()).collect()
    }
}

/// The calls a turn makes, each checked against the agent's tools.
pub fn turn_calls(turn: &Turn, tools: &[ToolSpec]) -> Result<Vec<(String, Value)>, String> {
    turn.calls
        .iter()
        .map(|c| {
            known(&c.tool, tools)?;
            Ok((c.tool.clone(), c.args.clone()))
        })
        .collect()
}

/// The calls of a message made of `/call <tool> {json}` lines; `None` when the message
/// is not one. Every line must be a call of a tool this agent has.
pub fn slash_calls(
    message: &str,
    tools: &[ToolSpec],
) -> Option<Result<Vec<(String, Value)>, String>> {
    let lines: Vec<&str> = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    if !lines.first()?.starts_with("/call") {
        return None;
    }
    Some(lines.iter().map(|line| slash_call(line, tools)).collect())
}

fn slash_call(line: &str, tools: &[ToolSpec]) -> Result<(String, Value), String> {
    let rest = line
        .strip_prefix("/call ")
        .ok_or_else(|| format!("`{line}` is not `/call <tool> {{json}}`"))?
        .trim();
    let (name, args) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
    known(name, tools)?;
    let args = match args.trim() {
        "" => empty_object(),
        json => serde_json::from_str::<Value>(json)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| format!("the arguments of `{name}` are not a JSON object: {json}"))?,
    };
    Ok((name.to_string(), args))
}

fn known(name: &str, tools: &[ToolSpec]) -> Result<(), String> {
    if tools.iter().any(|t| t.name == name) {
        return Ok(());
    }
    Err(format!(
        "this agent has no tool `{name}` (its tools: {})",
        tool_list(tools)
    ))
}

/// The agent's tools, for messages: `a, b, c`.
pub fn tool_list(tools: &[ToolSpec]) -> String {
    let names: Vec<&str> = tools
        .iter()
        .map(|t| t.name.as_str())
        .filter(|n| !n.starts_with("__"))
        .collect();
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools(names: &[&str]) -> Vec<ToolSpec> {
        names
            .iter()
            .map(|n| ToolSpec {
                name: (*n).into(),
                description: String::new(),
                input_schema: json!({"type": "object"}),
                strict: false,
            })
            .collect()
    }

    #[test]
    fn a_script_matches_its_first_turn_case_insensitively() {
        let script = DevScript::parse(
            r#"[{"user": "Cancel", "calls": [{"tool": "cancel_order", "args": {"order_id": "A-1"}}], "reply": "Done."},
                {"user": "hello", "reply": "Hi."}, {"user": "cancel everything", "reply": "never reached"}]"#,
        )
        .unwrap();
        let turn = script.turn("please CANCEL everything").unwrap();
        assert_eq!(turn.reply.as_deref(), Some("Done."));
        let calls = turn_calls(turn, &tools(&["cancel_order"])).unwrap();
        assert_eq!(
            calls,
            vec![("cancel_order".to_string(), json!({"order_id": "A-1"}))]
        );
        assert_eq!(
            script.turn("Hello there").unwrap().reply.as_deref(),
            Some("Hi.")
        );
        assert!(script.turn("what?").is_none());
        assert_eq!(script.cues(), vec!["Cancel", "hello", "cancel everything"]);
    }

    #[test]
    fn a_bad_script_says_what_is_wrong() {
        let not_a_list = DevScript::parse(r#"{"user": "x"}"#).unwrap_err();
        assert!(not_a_list.contains("not a list of turns"), "{not_a_list}");
        let unknown = DevScript::parse(r#"[{"user": "x", "answer": "y"}]"#).unwrap_err();
        assert!(unknown.contains("unknown field `answer`"), "{unknown}");
        let empty = DevScript::parse(r#"[{"user": " "}]"#).unwrap_err();
        assert_eq!(empty, "LLM_SCRIPT turn 0: `user` is empty");
        let args = DevScript::parse(r#"[{"user": "x", "calls": [{"tool": "t", "args": [1]}]}]"#);
        assert_eq!(
            args.unwrap_err(),
            "LLM_SCRIPT turn 0: the arguments of `t` are not a JSON object"
        );
        let script = DevScript::parse(r#"[{"user": "x", "calls": [{"tool": "nope"}]}]"#).unwrap();
        let missing = turn_calls(script.turn("x").unwrap(), &tools(&["a", "__finish__"]));
        assert_eq!(
            missing.unwrap_err(),
            "this agent has no tool `nope` (its tools: a)"
        );
    }

    #[test]
    fn slash_calls_call_any_tool_with_json_arguments() {
        let t = tools(&["book", "ping"]);
        assert_eq!(slash_calls("book a flight", &t), None);
        let calls = slash_calls("/call book {\"from\": \"BER\"}\n/call ping", &t).unwrap();
        assert_eq!(
            calls.unwrap(),
            vec![
                ("book".to_string(), json!({"from": "BER"})),
                ("ping".to_string(), json!({}))
            ]
        );
        let bad = slash_calls("/call book {from: BER}", &t)
            .unwrap()
            .unwrap_err();
        assert_eq!(
            bad,
            "the arguments of `book` are not a JSON object: {from: BER}"
        );
        let unknown = slash_calls("/call fly {}", &t).unwrap().unwrap_err();
        assert_eq!(
            unknown,
            "this agent has no tool `fly` (its tools: book, ping)"
        );
        let mixed = slash_calls("/call ping\nand then?", &t)
            .unwrap()
            .unwrap_err();
        assert!(
            mixed.contains("`and then?` is not `/call <tool> {json}`"),
            "{mixed}"
        );
    }
}
