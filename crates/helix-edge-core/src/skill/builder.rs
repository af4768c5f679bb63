//! An agent's skills, as its builder takes them ([`AgentBuilder::skills`],
//! [`AgentBuilder::skill_provider`], [`AgentBuilder::preload_skills`]) and its `build`
//! checks and adds them: the catalog and the preloaded instructions after the system
//! prompt (skills fixed at build time) or read as each run starts (a provider's), the
//! skill tools, and — for skills that say which tools they allow — the guard that
//! refuses other tools while one of them is loaded.

use super::provider::SkillProvider;
use super::{LOAD_SKILL, READ_SKILL_FILE, Skill, catalog, skill_tools};
use crate::agent::{Agent, AgentBuilder, Extension, FINISH_TOOL, SystemPrompt};
use crate::error::{DefinitionError, ToolError};
use crate::message::{Message, ToolCall};
use serde_json::Value;
use std::rc::Rc;

/// The skills given to a builder.
#[derive(Default)]
struct Skills {
    skills: Vec<Skill>,
    provider: Option<Rc<dyn SkillProvider>>,
    preload: Vec<String>,
}

impl Extension for Skills {
    fn order(&self) -> u8 {
        1 // after the companion tools
    }

    fn apply(self: Box<Self>, agent: Agent) -> Result<Agent, DefinitionError> {
        let fixed = self.provider.as_ref().and_then(|p| p.fixed());
        match (self.provider.clone(), fixed) {
            (None, _) => with_skills(agent, self.skills, &self.preload),
            (Some(_), _) if !self.skills.is_empty() => Err(DefinitionError::InvalidSkill {
                agent: agent.name.clone(),
                reason: "takes skills from one place: `skills(..)` or `skill_provider(..)`".into(),
            }),
            (Some(_), Some(fixed)) => with_skills(agent, fixed.to_vec(), &self.preload),
            (Some(provider), None) => Ok(super::run::with_provider(agent, provider, self.preload)),
        }
    }
}

impl AgentBuilder {
    /// Adds skills (see [`crate::skill`]): their catalog goes into the system prompt,
    /// and the `load_skill` and `read_skill_file` tools are added.
    pub fn skills(self, skills: impl IntoIterator<Item = Skill>) -> Self {
        self.extend(|s: &mut Skills| s.skills.extend(skills))
    }

    /// Takes its skills from `provider` (see [`crate::skill`]): a
    /// [`StoredSkills`](crate::skill::StoredSkills) over an R2 bucket or a KV namespace
    /// is listed as each run starts, each skill loaded and each file read when the model
    /// asks. A `Vec<Skill>` is the same as [`skills`](Self::skills).
    pub fn skill_provider(self, provider: impl SkillProvider + 'static) -> Self {
        let provider: Rc<dyn SkillProvider> = Rc::new(provider);
        self.extend(|s: &mut Skills| s.provider = Some(provider))
    }

    /// Puts these skills' instructions in the system prompt from the start (they must be
    /// among the agent's skills: checked when the agent is built for skills fixed then,
    /// when a run starts for a provider's).
    pub fn preload_skills<N: Into<String>>(self, names: impl IntoIterator<Item = N>) -> Self {
        self.extend(|s: &mut Skills| s.preload.extend(names.into_iter().map(Into::into)))
    }
}

/// `agent` with `skills` (checked): the catalog and the `preload`ed skills' instructions
/// after its system prompt, and the skill tools.
fn with_skills(
    mut agent: Agent,
    skills: Vec<Skill>,
    preload: &[String],
) -> Result<Agent, DefinitionError> {
    let invalid = |reason: String| DefinitionError::InvalidSkill {
        agent: agent.name.clone(),
        reason,
    };
    if skills.is_empty() {
        return match preload.first() {
            Some(name) => Err(invalid(format!(
                "preloads skill '{name}' but has no skills"
            ))),
            None => Ok(agent),
        };
    }
    for (i, skill) in skills.iter().enumerate() {
        skill.check().map_err(|e| invalid(e.to_string()))?;
        if skills[..i].iter().any(|s| s.name() == skill.name()) {
            return Err(invalid(format!("skill '{}' is given twice", skill.name())));
        }
    }
    if let Some(name) = preload
        .iter()
        .find(|n| !skills.iter().any(|s| s.name() == *n))
    {
        return Err(invalid(format!(
            "preloads skill '{name}', which it does not have"
        )));
    }
    let catalog = catalog(&skills, preload);
    agent.system_prompt = match agent.system_prompt {
        SystemPrompt::Static(text) => SystemPrompt::Static(text + &catalog),
        SystemPrompt::Dynamic(f) => {
            SystemPrompt::Dynamic(Rc::new(move |state| f(state) + &catalog))
        }
    };
    for skill in &skills {
        let allowed = skill.frontmatter().allowed_tools.iter().flatten();
        if let Some(tool) = allowed.into_iter().find(|t| agent.tool(t).is_none()) {
            return Err(invalid(format!(
                "skill '{}' allows tool '{tool}', which the agent does not have",
                skill.name()
            )));
        }
    }
    if skills
        .iter()
        .any(|s| s.frontmatter().allowed_tools.is_some())
    {
        let preloaded = limits(skills.iter().filter(|s| preload.contains(&s.name)));
        guard(&mut agent, move || preloaded.clone());
    }
    agent.tools.extend(skill_tools(Rc::new(skills)));
    Ok(agent)
}

/// The tools that `skills` allow, for those that say.
pub(super) fn limits<'a>(skills: impl Iterator<Item = &'a Skill>) -> Vec<(String, Vec<String>)> {
    skills
        .filter_map(|s| Some((s.name.clone(), s.frontmatter().allowed_tools.clone()?)))
        .collect()
}

/// Adds to `agent`'s guard the refusal of calls that the skills loaded in the run and
/// the preloaded ones (with their allowed tools, as `preloaded` gives them) do not allow.
pub(super) fn guard(
    agent: &mut Agent,
    preloaded: impl Fn() -> Vec<(String, Vec<String>)> + 'static,
) {
    let before = agent.guard.take();
    agent.guard = Some(Rc::new(move |run: &[Message], call: &ToolCall| {
        let before = before.as_ref().and_then(|guard| guard(run, call));
        before.or_else(|| not_allowed(preloaded(), run, call))
    }));
}

/// The tools the skills loaded in `run` allow, for those that say: as their `load_skill`
/// results recorded them (the version loaded).
fn loaded_limits(run: &[Message]) -> Vec<(String, Vec<String>)> {
    let mut limits: Vec<(String, Vec<String>)> = Vec::new();
    for (name, result) in super::load_results(run) {
        // A skill loaded again counts as its latest version says.
        limits.retain(|(n, _)| n != name);
        if let Some(Value::Array(tools)) = result.get("allowedTools") {
            let tools = tools.iter().filter_map(Value::as_str).map(String::from);
            limits.push((name.to_string(), tools.collect()));
        }
    }
    limits
}

/// Why `call` may not run while the skills loaded in `run` (and the `preloaded` ones)
/// say which tools they allow: none of them allows its tool. The skill tools and the
/// output are always allowed.
fn not_allowed(
    mut limits: Vec<(String, Vec<String>)>,
    run: &[Message],
    call: &ToolCall,
) -> Option<ToolError> {
    if [LOAD_SKILL, READ_SKILL_FILE, FINISH_TOOL].contains(&call.name.as_str()) {
        return None;
    }
    for (name, tools) in loaded_limits(run) {
        if !limits.iter().any(|(n, _)| *n == name) {
            limits.push((name, tools));
        }
    }
    let limiting: Vec<&(String, Vec<String>)> = limits.iter().collect();
    if limiting.is_empty() || limiting.iter().any(|(_, tools)| tools.contains(&call.name)) {
        return None;
    }
    let skills: Vec<String> = limiting
        .iter()
        .map(|(name, _)| format!("'{name}'"))
        .collect();
    let mut allowed: Vec<&str> = limiting
        .iter()
        .flat_map(|(_, tools)| tools.iter().map(String::as_str))
        .collect();
    allowed.dedup();
    Some(ToolError::NotAllowed {
        skills: skills.join(", "),
        allowed: allowed.join(", "),
    })
}
