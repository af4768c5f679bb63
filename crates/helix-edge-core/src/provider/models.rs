//! [`ConfiguredModels`]: each agent's model, from the deployment's provider
//! configuration — the configured provider over the platform's transport, or the
//! built-in deterministic `demo` model when that is what is configured (or what the
//! agent asks for), with the deployment's script (`LLM_SCRIPT`). The demo model comes
//! with the feature `demo` ([`DEMO`]).

use super::{HttpModel, ProviderConfig, ProviderKind, Transport};
use crate::error::ProviderError;
use crate::model::{Model, ModelSettings, Models};
use std::rc::Rc;

/// The demo model this build has, given the deployment's configuration.
type DemoOf = fn(&ProviderConfig) -> Result<Rc<dyn Model>, ProviderError>;
const DEMO: &[DemoOf] = &[
    #[cfg(feature = "demo")]
    |config| {
        Ok(Rc::new(crate::demo::DemoModel::with_script(
            config.script.as_deref(),
        )?))
    },
];

/// Picks each agent's model from the deployment's provider configuration.
pub struct ConfiguredModels<T: Transport + Clone + 'static> {
    config: Result<ProviderConfig, ProviderError>,
    transport: T,
}

impl<T: Transport + Clone + 'static> ConfiguredModels<T> {
    /// The models of `config` (as read from the vars), reached over `transport`.
    pub fn new(config: Result<ProviderConfig, ProviderError>, transport: T) -> Self {
        Self { config, transport }
    }
}

impl<T: Transport + Clone + 'static> Models for ConfiguredModels<T> {
    fn model_for(&self, settings: &ModelSettings) -> Result<Rc<dyn Model>, ProviderError> {
        let config = self.config.clone()?;
        if config.kind != ProviderKind::Demo && settings.provider.as_deref() != Some("demo") {
            return Ok(Rc::new(HttpModel::new(config, self.transport.clone())));
        }
        // Without the `demo` feature there is no demo model: a deployment with
        // `LLM_PROVIDER=demo` (or no `LLM_API_KEY`) is not configured.
        let demo = DEMO.first().ok_or_else(|| {
            ProviderError::NotConfigured(
                "no model provider: set LLM_API_KEY (and LLM_PROVIDER), or build with helix-edge's `demo` feature".into(),
            )
        })?;
        demo(&config)
    }
}
