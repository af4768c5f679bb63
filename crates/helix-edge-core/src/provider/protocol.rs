//! The wire protocols providers speak ([`Protocol`]): how a call is asked for and how
//! its stream is read. OpenAI's Chat Completions is always built in (OpenAI, Workers AI
//! and every compatible server speak it); Anthropic's Messages comes with the feature
//! `anthropic`. Each is registered once, in [`PROTOCOLS`].

use super::{Decoder, ProviderConfig, ProviderKind};
use crate::model::ModelRequest;

/// A provider's wire protocol.
pub trait Protocol {
    /// The providers that speak it.
    fn speaks(&self, kind: ProviderKind) -> bool;
    /// The base URL when `LLM_BASE_URL` is not set.
    fn base_url(&self) -> &'static str;
    /// The model when `LLM_MODEL` is not set.
    fn model(&self) -> &'static str;
    /// The path (after the base URL) and body of a streaming call of `model`, adding
    /// the protocol's headers (its key among them) to `headers`.
    fn request(
        &self,
        config: &ProviderConfig,
        model: &str,
        request: &ModelRequest<'_>,
        headers: &mut Vec<(String, String)>,
    ) -> (&'static str, String);
    /// A decoder for its stream.
    fn decoder(&self) -> Box<dyn Decoder>;
}

/// The protocols this build speaks.
const PROTOCOLS: &[&dyn Protocol] = &[
    &super::openai::OpenAi,
    #[cfg(feature = "anthropic")]
    &super::anthropic::Anthropic,
];

/// The protocol providers of `kind` speak, if this build has it.
pub(super) fn of(kind: ProviderKind) -> Option<&'static dyn Protocol> {
    PROTOCOLS.iter().copied().find(|p| p.speaks(kind))
}
