//! Reading a run's model options (feature `provider-options`): [`ProviderOptions`] from
//! the JSON a request gave, checked, and applied over an agent's [`ModelSettings`].

use super::RunOptions;
use crate::model::{ModelSettings, ReasoningEffort, ToolChoice};
use serde_json::{Map, Value};

/// The most a run's options take, serialized: they are written with every commit.
pub const MAX_OPTIONS_BYTES: usize = 8 * 1024;

/// Fields of the framework's own in each provider's request body: a pass-through object
/// may not set them.
const RESERVED: &[&str] = &[
    "model",
    "messages",
    "stream",
    "stream_options",
    "tools",
    "system",
];

/// Model options for one run (JSON: `providerOptions`), read from the JSON a request gave
/// ([`read`](Self::read)), which the run stores as it came. Each set field replaces the
/// agent's; the pass-through objects are merged into the provider's request body key by
/// key, unchecked (the provider judges them), over the agent's own.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProviderOptions {
    /// Which tools the model must or may call: `"auto"`, `"required"`, `"none"` or
    /// `{"tool": name}`.
    pub tool_choice: Option<ToolChoice>,
    /// OpenAI's `reasoning_effort`: `low`, `medium` or `high`.
    pub reasoning_effort: Option<ReasoningEffort>,
    /// Anthropic's extended thinking budget (tokens, at least 1024).
    pub thinking_budget: Option<u32>,
    /// Fields for OpenAI-format request bodies (OpenAI, Workers AI, compatible servers).
    pub openai: Option<Map<String, Value>>,
    /// Fields for Anthropic Messages request bodies.
    pub anthropic: Option<Map<String, Value>>,
}

impl ProviderOptions {
    /// The options in `given` (a request's `providerOptions`), checked for any agent; the
    /// error says what is wrong, under `providerOptions`. (Read field by field from the
    /// JSON value: a derived reader would cost this small object ~4 KiB of bundle.)
    pub fn read(given: &Value) -> Result<Self, String> {
        let Some(fields) = given.as_object() else {
            return Err("providerOptions must be an object.".into());
        };
        let size = serde_json::to_vec(given).map_or(usize::MAX, |b| b.len());
        if size > MAX_OPTIONS_BYTES {
            return Err(format!(
                "providerOptions take at most {MAX_OPTIONS_BYTES} bytes as JSON ({size} given)."
            ));
        }
        let mut options = Self::default();
        for (key, value) in fields {
            let wrong = |what: &str| format!("providerOptions.{key} must be {what}.");
            match key.as_str() {
                "toolChoice" => {
                    let choice = tool_choice(value);
                    let what = "\"auto\", \"required\", \"none\" or {\"tool\": name}";
                    options.tool_choice = Some(choice.ok_or_else(|| wrong(what))?);
                }
                "reasoningEffort" => {
                    let effort = [
                        ReasoningEffort::Low,
                        ReasoningEffort::Medium,
                        ReasoningEffort::High,
                    ]
                    .into_iter()
                    .find(|e| value.as_str() == Some(e.as_str()));
                    options.reasoning_effort =
                        Some(effort.ok_or_else(|| wrong("\"low\", \"medium\" or \"high\""))?);
                }
                "thinkingBudget" => {
                    // A whole number, as JSON Schema's `integer` (`2048.0` too).
                    let whole = value.as_f64().filter(|b| b.fract() == 0.0 && *b >= 0.0);
                    let budget = whole.and_then(|b| u32::try_from(b as u64).ok());
                    let budget = budget.filter(|b| *b >= 1024);
                    options.thinking_budget = Some(
                        budget.ok_or_else(|| wrong("a whole number of tokens, at least 1024"))?,
                    );
                }
                "openai" => options.openai = Some(pass_through_fields(key, value)?),
                "anthropic" => options.anthropic = Some(pass_through_fields(key, value)?),
                other => {
                    return Err(format!(
                        "providerOptions: unknown field `{other}`; they are toolChoice, reasoningEffort, thinkingBudget, openai and anthropic."
                    ));
                }
            }
        }
        Ok(options)
    }

    /// Checks the options for a run of `agent`, which has the tools `has_tool` says.
    pub fn check(&self, agent: &str, has_tool: &dyn Fn(&str) -> bool) -> Result<(), String> {
        match &self.tool_choice {
            Some(ToolChoice::Tool(name)) if !has_tool(name) => Err(format!(
                "providerOptions.toolChoice names `{name}`, which is not a tool of agent `{agent}`."
            )),
            _ => Ok(()),
        }
    }

    /// `settings` with these options applied over them.
    pub fn over(&self, settings: &ModelSettings) -> ModelSettings {
        let mut applied = settings.clone();
        if let Some(choice) = &self.tool_choice {
            applied.tool_choice = Some(choice.clone());
        }
        applied.reasoning_effort = self.reasoning_effort.or(applied.reasoning_effort);
        applied.thinking_budget = self.thinking_budget.or(applied.thinking_budget);
        merge(&mut applied.openai_fields, &self.openai);
        merge(&mut applied.anthropic_fields, &self.anthropic);
        applied
    }
}

/// A tool choice as JSON: `"auto"`, `"required"`, `"none"` or `{"tool": name}`.
fn tool_choice(value: &Value) -> Option<ToolChoice> {
    match value {
        Value::String(s) => match s.as_str() {
            "auto" => Some(ToolChoice::Auto),
            "required" => Some(ToolChoice::Required),
            "none" => Some(ToolChoice::None),
            _ => None,
        },
        Value::Object(o) if o.len() == 1 => {
            let name = o.get("tool")?.as_str()?;
            Some(ToolChoice::Tool(name.to_string()))
        }
        _ => None,
    }
}

/// A provider's pass-through object, none of whose fields helix-edge sets itself.
fn pass_through_fields(provider: &str, value: &Value) -> Result<Map<String, Value>, String> {
    let Some(fields) = value.as_object() else {
        return Err(format!("providerOptions.{provider} must be an object."));
    };
    match fields.keys().find(|k| RESERVED.contains(&k.as_str())) {
        Some(key) => Err(format!(
            "providerOptions.{provider}.{key} is set by helix-edge itself and cannot be passed through."
        )),
        None => Ok(fields.clone()),
    }
}

/// `extra`'s keys over `fields`'.
fn merge(fields: &mut Option<Map<String, Value>>, extra: &Option<Map<String, Value>>) {
    if let Some(extra) = extra {
        let fields = fields.get_or_insert_with(Map::new);
        fields.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

/// Reads and applies runs' options: the build's [`RunOptions`].
pub struct Reader;

impl RunOptions for Reader {
    fn check(
        &self,
        given: &Value,
        agent: &str,
        has_tool: &dyn Fn(&str) -> bool,
    ) -> Result<(), String> {
        ProviderOptions::read(given)?.check(agent, has_tool)
    }

    fn apply(&self, given: &Value, settings: &ModelSettings) -> Result<ModelSettings, String> {
        Ok(ProviderOptions::read(given)?.over(settings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn has_tool(name: &str) -> bool {
        name == "lookup"
    }

    #[test]
    fn options_apply_over_the_agents_settings_and_merge_pass_through_fields() {
        let settings = ModelSettings {
            reasoning_effort: Some(ReasoningEffort::Low),
            temperature: Some(0.5),
            openai_fields: Some(Map::from_iter([
                ("user".to_string(), json!("agent")),
                ("seed".to_string(), json!(1)),
            ])),
            ..Default::default()
        };
        let options = ProviderOptions::read(&json!({
            "toolChoice": {"tool": "lookup"},
            "thinkingBudget": 2048,
            "openai": {"seed": 7, "logprobs": true}
        }))
        .unwrap();
        options.check("a", &has_tool).unwrap();
        let applied = options.over(&settings);
        assert_eq!(applied.tool_choice, Some(ToolChoice::Tool("lookup".into())));
        assert_eq!(applied.reasoning_effort, Some(ReasoningEffort::Low), "kept");
        assert_eq!(applied.thinking_budget, Some(2048));
        assert_eq!(applied.temperature, Some(0.5));
        assert_eq!(
            Value::Object(applied.openai_fields.unwrap()),
            json!({"user": "agent", "seed": 7, "logprobs": true})
        );
        assert_eq!(applied.anthropic_fields, None);
        // A whole number written with a fraction is one (JSON Schema's `integer`).
        let written = ProviderOptions::read(&json!({"thinkingBudget": 2048.0})).unwrap();
        assert_eq!(written.thinking_budget, Some(2048));
    }

    #[test]
    fn every_kind_of_bad_options_is_refused_with_a_reason() {
        let named = ProviderOptions::read(&json!({"toolChoice": {"tool": "nope"}})).unwrap();
        let err = named.check("a", &has_tool).unwrap_err();
        assert!(err.contains("not a tool of agent `a`"), "{err}");
        for (bad, says) in [
            (json!({"thinkingBudget": 1000}), "at least 1024"),
            (
                json!({"thinkingBudget": 4_294_967_296_u64}),
                "providerOptions.thinkingBudget must be",
            ),
            (
                json!({"openai": {"messages": []}}),
                "providerOptions.openai.messages",
            ),
            (
                json!({"anthropic": {"system": "x"}}),
                "providerOptions.anthropic.system",
            ),
            (
                json!({"openai": {"pad": "x".repeat(MAX_OPTIONS_BYTES)}}),
                "at most 8192 bytes",
            ),
            (
                json!({"openai": null}),
                "providerOptions.openai must be an object",
            ),
            (json!("high"), "providerOptions must be an object"),
            (
                json!({"toolChoice": "sometimes"}),
                "providerOptions.toolChoice must be",
            ),
            (
                json!({"toolChoice": {"tool": "a", "x": 1}}),
                "providerOptions.toolChoice must be",
            ),
            (
                json!({"toolChoice": null}),
                "providerOptions.toolChoice must be",
            ),
            (
                json!({"reasoningEffort": "max"}),
                "providerOptions.reasoningEffort must be",
            ),
            (
                json!({"thinkingBudget": -1}),
                "providerOptions.thinkingBudget must be",
            ),
            (
                json!({"thinkingBudget": 1500.5}),
                "providerOptions.thinkingBudget must be",
            ),
            (
                json!({"openai": [1]}),
                "providerOptions.openai must be an object",
            ),
            (json!({"temperature": 1}), "unknown field `temperature`"),
        ] {
            let err = ProviderOptions::read(&bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
