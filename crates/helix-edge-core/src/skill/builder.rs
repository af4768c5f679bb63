//! An agent's skills, as its builder takes them ([`AgentBuilder::skills`],
//! [`AgentBuilder::preload_skills`]) and its `build` checks and adds them: the catalog
//! and the preloaded instructions after the system prompt, and the skill tools.

use super::{Skill, catalog, skill_tools};
use crate::agent::{Agent, AgentBuilder, Extension, SystemPrompt};
use crate::error::DefinitionError;
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
    agent.tools.extend(skill_tools(skills.into()));
    Ok(agent)
}
