//! Skills from a provider whose skills are not fixed at build time: the catalog is listed
//! as each run starts (a skill edited in the store is seen by the next run) and kept for
//! the run's model calls; the preloaded skills' instructions come with it, and their
//! allowed tools limit the run's calls.

use super::builder::{guard, limits};
use super::provider::{Catalog, SkillProvider};
use super::{catalog, skill_tools};
use crate::agent::Agent;
use std::cell::RefCell;
use std::rc::Rc;

/// A provider's skills as the runs of one agent see them.
struct Shelf {
    provider: Rc<dyn SkillProvider>,
    preload: Vec<String>,
    /// The catalog of the latest run that listed it, by run id.
    listed: RefCell<Option<(String, Rc<Catalog>)>>,
}

impl Shelf {
    /// What run `run_id` adds to its system prompt, and the problems to log (only when
    /// it lists the catalog: the first model call of the run in this instance).
    async fn prompt(&self, run_id: &str) -> (String, Vec<String>) {
        let cached = self.listed.borrow().clone();
        if let Some((run, catalog)) = cached
            && run == run_id
        {
            return (listed_text(&catalog, &self.preload), Vec::new());
        }
        let (catalog, mut problems) = match self.provider.catalog().await {
            Ok(mut catalog) => {
                let problems = std::mem::take(&mut catalog.problems);
                (catalog, problems.iter().map(ToString::to_string).collect())
            }
            Err(e) => (Catalog::default(), vec![e.to_string()]),
        };
        for name in &self.preload {
            if !catalog.skills.iter().any(|s| s.name == *name) {
                problems.push(format!("preloaded skill '{name}' is not in the catalog"));
            }
        }
        let text = listed_text(&catalog, &self.preload);
        *self.listed.borrow_mut() = Some((run_id.into(), Rc::new(catalog)));
        (text, problems)
    }

    /// The preloaded skills' allowed tools, as the latest catalog says.
    fn preloaded_limits(&self) -> Vec<(String, Vec<String>)> {
        let listed = self.listed.borrow();
        let skills = listed.iter().flat_map(|(_, c)| c.skills.iter());
        limits(skills.filter(|s| self.preload.contains(&s.name)))
    }
}

/// `agent` with skills from `provider`, listed as each run starts.
pub(super) fn with_provider(
    mut agent: Agent,
    provider: Rc<dyn SkillProvider>,
    preload: Vec<String>,
) -> Agent {
    let shelf = Rc::new(Shelf {
        provider: provider.clone(),
        preload,
        listed: RefCell::new(None),
    });
    let prompts = shelf.clone();
    agent.run_prompt = Some(Rc::new(move |run_id: &str| {
        let (shelf, run_id) = (prompts.clone(), run_id.to_string());
        Box::pin(async move { shelf.prompt(&run_id).await })
    }));
    guard(&mut agent, move || shelf.preloaded_limits());
    agent.tools.extend(skill_tools(provider));
    agent
}

/// The system prompt's part on the `listed` skills: nothing when there are none.
fn listed_text(listed: &Catalog, preload: &[String]) -> String {
    if listed.skills.is_empty() {
        return String::new();
    }
    catalog(&listed.skills, preload)
}
