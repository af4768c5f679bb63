//! An agent's skills, as its builder takes them ([`AgentBuilder::skills`],
//! [`AgentBuilder::preload_skills`]) and its `build` checks and adds them: the catalog
//! and the preloaded instructions after the system prompt, the skill tools, and — for
//! skills that say which tools they allow — the guard that refuses other tools while
//! one of them is loaded.

use super::{LOAD_SKILL, READ_SKILL_FILE, Skill, catalog, skill_tools};
use crate::agent::{Agent, AgentBuilder, Extension, FINISH_TOOL, SystemPrompt};
use crate::error::{DefinitionError, ToolError};
use crate::message::{Message, ToolCall};
use std::rc::Rc;

/// The skills given to a builder.
#[derive(Default)]
struct Skills {
    skills: Vec<Skill>,
    preload: Vec<String>,
}

impl Extension for Skills {
    fn order(&self) -> u8 {
        1 // after the companion tools
    }

    fn apply(self: Box<Self>, agent: Agent) -> Result<Agent, DefinitionError> {
        with_skills(agent, self.skills, &self.preload)
    }
}

impl AgentBuilder {
    /// Adds skills (see [`crate::skill`]): their catalog goes into the system prompt,
    /// and the `load_skill` and `read_skill_file` tools are added.
    pub fn skills(self, skills: impl IntoIterator<Item = Skill>) -> Self {
        self.extend(|s: &mut Skills| s.skills.extend(skills))
    }

    /// Puts these skills' instructions in the system prompt from the start (they must be
    /// among the agent's [`skills`](Self::skills)).
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
    let limits: Vec<(String, Vec<String>)> = skills
        .iter()
        .filter_map(|s| Some((s.name().to_string(), s.frontmatter().allowed_tools.clone()?)))
        .collect();
    if !limits.is_empty() {
        let preloaded = preload.to_vec();
        let before = agent.guard.take();
        agent.guard = Some(Rc::new(move |run: &[Message], call: &ToolCall| {
            let before = before.as_ref().and_then(|guard| guard(run, call));
            before.or_else(|| not_allowed(&limits, &preloaded, run, call))
        }));
    }
    agent.tools.extend(skill_tools(skills.into()));
    Ok(agent)
}

/// Why `call` may not run while the skills loaded in `run` (and the `preloaded` ones)
/// say which tools they allow: none of them allows its tool. The skill tools and the
/// output are always allowed.
fn not_allowed(
    limits: &[(String, Vec<String>)],
    preloaded: &[String],
    run: &[Message],
    call: &ToolCall,
) -> Option<ToolError> {
    if [LOAD_SKILL, READ_SKILL_FILE, FINISH_TOOL].contains(&call.name.as_str()) {
        return None;
    }
    let loaded = super::loaded(run);
    let limiting: Vec<&(String, Vec<String>)> = limits
        .iter()
        .filter(|(name, _)| loaded.contains(name) || preloaded.contains(name))
        .collect();
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
