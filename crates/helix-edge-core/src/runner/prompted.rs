//! A model call whose system prompt gains what the run read as it started (a skill
//! provider's catalog, see [`crate::agent::RUN_PROMPTS`]): read inside the model call's
//! own future, so a step whose agent has nothing to read carries no await for it.

use crate::agent::RunPrompt;
use crate::error::ProviderError;
use crate::host::LogValue::Str;
use crate::host::{Host, Level};
use crate::model::{Delta, Model, ModelRequest, ModelTurn};
use futures::future::LocalBoxFuture;
use std::rc::Rc;

/// `inner`, with the system prompt of each call extended by `read` for run `run`.
pub(super) struct Prompted {
    pub inner: Rc<dyn Model>,
    pub read: RunPrompt,
    pub session: String,
    pub run: String,
    pub host: Rc<dyn Host>,
}

impl Model for Prompted {
    fn generate<'a>(
        &'a self,
        mut request: ModelRequest<'a>,
        on_delta: &'a mut dyn FnMut(Delta),
    ) -> LocalBoxFuture<'a, Result<ModelTurn, ProviderError>> {
        Box::pin(async move {
            let (text, problems) = (self.read)(&self.run).await;
            for problem in &problems {
                let fields = [
                    ("session", Str(&self.session)),
                    ("run", Str(&self.run)),
                    ("problem", Str(problem)),
                ];
                self.host.log(Level::Warn, "run_prompt_problem", &fields);
            }
            request.system.push_str(&text);
            self.inner.generate(request, on_delta).await
        })
    }
}
