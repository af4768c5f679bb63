//! What a provider configuration supports. Each configuration starts from a profile —
//! OpenAI's own API, Anthropic, Workers AI, or a conservative one for any other
//! OpenAI-compatible server (an explicit `LLM_BASE_URL`) — which `LLM_CAPABILITIES`
//! adjusts. A feature the configuration lacks is never sent: [`Capabilities::apply`]
//! takes it out of the request before the protocol builds it, and the call's debug
//! line names what was left out.

use super::ProviderKind;
use crate::agent::FINISH_TOOL;
use crate::message::Message;
use crate::model::{ModelRequest, ModelSettings};
use std::borrow::Cow;

/// What a provider configuration supports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Tools marked strict: constrained decoding of their arguments.
    pub strict_tools: bool,
    /// `__finish__` marked strict (the agent's `.strict_output()`).
    pub strict_output: bool,
    /// The prompt-cache marks: OpenAI's `prompt_cache_key` (and its retention),
    /// Anthropic's `cache_control`.
    pub prompt_cache: bool,
    /// Image attachments as image parts (otherwise the model is told of them in text).
    pub images: bool,
    /// File attachments (PDFs, text) as file parts (otherwise told of in text).
    pub documents: bool,
    /// Reasoning settings: OpenAI's `reasoning_effort`, Anthropic's thinking budget.
    pub reasoning: bool,
}

/// The names `LLM_CAPABILITIES` uses, in the struct's order.
pub const NAMES: [&str; 6] = [
    "strict_tools",
    "strict_output",
    "prompt_cache",
    "images",
    "documents",
    "reasoning",
];

impl Capabilities {
    /// OpenAI's own API (and the demo model).
    pub const OPENAI: Self = Self::all(true);
    /// Anthropic's Messages API.
    pub const ANTHROPIC: Self = Self::all(true);
    /// Workers AI's OpenAI-compatible endpoint: no strict tools, no cache key, no files.
    pub const WORKERS_AI: Self = Self {
        images: true,
        ..Self::all(false)
    };
    /// Any other OpenAI-compatible server: only what every one of them takes.
    pub const COMPATIBLE: Self = Self::all(false);

    const fn all(on: bool) -> Self {
        Self {
            strict_tools: on,
            strict_output: on,
            prompt_cache: on,
            images: on,
            documents: on,
            reasoning: on,
        }
    }

    /// The profile of `kind`, talking to its own endpoint or (`own_endpoint` false) to
    /// a server at an explicit `LLM_BASE_URL`.
    pub fn profile(kind: ProviderKind, own_endpoint: bool) -> Self {
        match (kind, own_endpoint) {
            (ProviderKind::Anthropic, _) => Self::ANTHROPIC,
            (ProviderKind::WorkersAi, _) => Self::WORKERS_AI,
            (ProviderKind::OpenAi, false) => Self::COMPATIBLE,
            (ProviderKind::OpenAi | ProviderKind::Demo, _) => Self::OPENAI,
        }
    }

    /// The profile adjusted by `spec` (`LLM_CAPABILITIES`): names separated by commas
    /// or spaces, each turning a feature on (`images`, `+images`) or off (`-images`);
    /// `none` first turns every feature off.
    pub fn adjusted(mut self, spec: &str) -> Result<Self, String> {
        for word in spec
            .split([',', ' '])
            .map(str::trim)
            .filter(|w| !w.is_empty())
        {
            if word == "none" {
                self = Self::all(false);
                continue;
            }
            let (name, on) = match word.strip_prefix('-') {
                Some(name) => (name, false),
                None => (word.trim_start_matches('+'), true),
            };
            *self.flag(name).ok_or_else(|| {
                format!(
                    "LLM_CAPABILITIES: '{name}' is not one of none, {}",
                    NAMES.join(", ")
                )
            })? = on;
        }
        Ok(self)
    }

    fn flag(&mut self, name: &str) -> Option<&mut bool> {
        Some(match name {
            "strict_tools" => &mut self.strict_tools,
            "strict_output" => &mut self.strict_output,
            "prompt_cache" => &mut self.prompt_cache,
            "images" => &mut self.images,
            "documents" => &mut self.documents,
            "reasoning" => &mut self.reasoning,
            _ => return None,
        })
    }

    /// `request` without what this configuration lacks, and the names of the features
    /// taken out (empty: the request as it was, not copied).
    pub fn apply<'a>(
        &self,
        request: &'a ModelRequest<'a>,
        settings: &'a mut Option<ModelSettings>,
        messages: &'a mut Option<Vec<Message>>,
    ) -> (Cow<'a, ModelRequest<'a>>, Vec<&'static str>) {
        let mut dropped = Vec::new();
        let strict_ok = |name: &str| match name == FINISH_TOOL {
            true => self.strict_output,
            false => self.strict_tools,
        };
        let loose = request
            .tools
            .iter()
            .any(|t| t.strict && !strict_ok(&t.name));
        let uncached = request.settings.prompt_cache.is_some() && !self.prompt_cache;
        let unreadable = |m: &Message| match m {
            Message::User { attachments, .. } | Message::Tool { attachments, .. } => {
                attachments.iter().any(|a| !self.takes(a))
            }
            _ => false,
        };
        let files = request.messages.iter().any(unreadable);
        let settings_of = &request.settings;
        let unreasoned = !self.reasoning
            && (settings_of.reasoning_effort.is_some() || settings_of.thinking_budget.is_some());
        if !(loose || uncached || files || unreasoned) {
            return (Cow::Borrowed(request), dropped);
        }
        let mut adjusted = request.clone();
        if loose {
            let lost = |finish: bool| {
                let strict =
                    |t: &&crate::model::ToolSpec| t.strict && (t.name == FINISH_TOOL) == finish;
                request
                    .tools
                    .iter()
                    .filter(strict)
                    .any(|t| !strict_ok(&t.name))
            };
            if lost(false) {
                dropped.push("strict_tools");
            }
            if lost(true) {
                dropped.push("strict_output");
            }
            for tool in &mut adjusted.tools {
                tool.strict &= strict_ok(&tool.name);
            }
        }
        if uncached || unreasoned {
            let s = settings.insert(request.settings.clone());
            if uncached {
                dropped.push("prompt_cache");
                s.prompt_cache = None;
            }
            if unreasoned {
                dropped.push("reasoning");
                (s.reasoning_effort, s.thinking_budget) = (None, None);
            }
            adjusted.settings = s;
        }
        if files {
            dropped.push("attachments");
            let told = messages.insert(request.messages.iter().map(|m| self.readable(m)).collect());
            adjusted.messages = told;
        }
        (Cow::Owned(adjusted), dropped)
    }

    fn takes(&self, a: &crate::attachment::Attachment) -> bool {
        match a.kind {
            crate::attachment::AttachmentKind::Image => self.images,
            crate::attachment::AttachmentKind::File => self.documents,
        }
    }

    /// `message` with the attachments this configuration cannot take told of in text
    /// (a tool's, beside its result: `{"result": …, "attachments": ["[Attachment: …]"]}`).
    fn readable(&self, message: &Message) -> Message {
        let mut message = message.clone();
        if let Message::Tool {
            content,
            attachments,
            ..
        } = &mut message
        {
            let (kept, told): (Vec<_>, Vec<_>) = std::mem::take(attachments)
                .into_iter()
                .partition(|a| self.takes(a));
            *attachments = kept;
            if !told.is_empty() {
                let told: Vec<String> = told.iter().map(|a| a.placeholder()).collect();
                *content = serde_json::json!({ "result": content, "attachments": told });
            }
            return message;
        }
        let Message::User {
            content,
            attachments,
            metadata,
        } = &message
        else {
            return message;
        };
        let (kept, told): (Vec<_>, Vec<_>) =
            attachments.iter().cloned().partition(|a| self.takes(a));
        let mut content = content.clone();
        for a in told {
            if !content.is_empty() {
                content.push('\n');
            }
            content.push_str(&a.placeholder());
        }
        Message::User {
            content,
            attachments: kept,
            metadata: metadata.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_and_adjustments() {
        assert_eq!(
            Capabilities::profile(ProviderKind::OpenAi, true),
            Capabilities::OPENAI
        );
        assert_eq!(
            Capabilities::profile(ProviderKind::OpenAi, false),
            Capabilities::COMPATIBLE
        );
        let workers = Capabilities::profile(ProviderKind::WorkersAi, true);
        assert!(!workers.strict_tools && !workers.prompt_cache && workers.images);
        let c = Capabilities::COMPATIBLE
            .adjusted("strict_tools, +images")
            .unwrap();
        assert!(c.strict_tools && c.images && !c.prompt_cache);
        let c = Capabilities::OPENAI
            .adjusted("-prompt_cache documents")
            .unwrap();
        assert!(!c.prompt_cache && c.documents && c.strict_tools);
        assert_eq!(
            Capabilities::OPENAI.adjusted("none").unwrap(),
            Capabilities::COMPATIBLE
        );
        let bad = Capabilities::OPENAI.adjusted("vision").unwrap_err();
        assert_eq!(
            bad,
            "LLM_CAPABILITIES: 'vision' is not one of none, strict_tools, strict_output, prompt_cache, images, documents, reasoning"
        );
    }
}
