//! Large tool attachments kept in a store (feature `attachment-store`, with
//! [`AgentBuilder::attachment_store`]): an agent's tools may attach files of up to
//! [`MAX_STORED_ATTACHMENT_BYTES`] each ([`MAX_STORED_CALL_BYTES`] of base64 a call),
//! instead of 512 KiB and 1 MiB. When a call ends, every inline attachment of more than
//! [`INLINE_UP_TO`] bytes of base64 is written to the store under
//! `attachments/{session}/{call}/{n}` and the transcript keeps a reference to it (`url`
//! `stored:{key}`), so the session's record stays small. Each model call reads the
//! referenced files back and sends them inline, as the provider takes them.
//!
//! A reference is only ever written by the runtime: a message from outside with a
//! `stored:` URL is refused (attachments from outside are `http(s)` URLs or inline).
//!
//! [`AgentBuilder::attachment_store`]: crate::agent::AgentBuilder::attachment_store

use crate::agent::{Agent, AgentBuilder, Extension};
use crate::attachment::Attachment;
use crate::error::{DefinitionError, ProviderError, ToolError};
use crate::message::Message;
use crate::model::{Delta, Model, ModelRequest, ModelTurn};
use crate::objects::ObjectStore;
use crate::tool::{Execution, ToolContext};
use futures::future::LocalBoxFuture;
use std::rc::Rc;

/// The most bytes (decoded) one attachment of a tool of such an agent holds.
pub const MAX_STORED_ATTACHMENT_BYTES: usize = 10 * 1024 * 1024;
/// The most base64 a call's attachments hold in all.
pub const MAX_STORED_CALL_BYTES: usize = 16 * 1024 * 1024;
/// Attachments of up to this many bytes of base64 stay in the transcript.
pub const INLINE_UP_TO: usize = 64 * 1024;
/// How a reference to a stored attachment begins.
pub const STORED: &str = "stored:";

/// The store given to a builder.
#[derive(Default)]
struct Stored(Option<Rc<dyn ObjectStore>>);

impl Extension for Stored {
    fn order(&self) -> u8 {
        4 // after every tool is added
    }

    fn apply(self: Box<Self>, mut agent: Agent) -> Result<Agent, DefinitionError> {
        let Some(store) = self.0 else {
            return Ok(agent);
        };
        for tool in &mut agent.tools {
            let Execution::Server(run) = &tool.execution else {
                continue;
            };
            let (run, store) = (run.clone(), store.clone());
            tool.execution = Execution::Server(Rc::new(move |input, ctx: ToolContext| {
                ctx.raise_attachment_limits(MAX_STORED_ATTACHMENT_BYTES, MAX_STORED_CALL_BYTES);
                let (running, store) = (run(input, ctx.clone()), store.clone());
                Box::pin(async move {
                    let value = running.await?;
                    keep_large(&*store, &ctx).await?;
                    Ok(value)
                })
            }));
        }
        agent.model_layer = Some(Rc::new(move |inner| {
            Rc::new(ReadBack {
                inner,
                store: store.clone(),
            })
        }));
        Ok(agent)
    }
}

impl AgentBuilder {
    /// Keeps its tools' large attachments in `store` (an R2 bucket on the platform): see
    /// [`crate::attachment_store`].
    pub fn attachment_store(self, store: impl ObjectStore + 'static) -> Self {
        let store: Rc<dyn ObjectStore> = Rc::new(store);
        self.extend(|s: &mut Stored| s.0 = Some(store))
    }
}

/// Writes the call's large inline attachments to `store`, each replaced by a reference.
async fn keep_large(store: &dyn ObjectStore, ctx: &ToolContext) -> Result<(), ToolError> {
    let mut attachments = ctx.take_attachments();
    for (n, attachment) in attachments.iter_mut().enumerate() {
        let Some(data) = attachment.data.take_if(|d| d.len() > INLINE_UP_TO) else {
            continue;
        };
        let key = format!(
            "attachments/{}/{}/{n}",
            ctx.session_id(),
            ctx.tool_call_id()
        );
        store
            .put(&key, data.into_bytes())
            .await
            .map_err(|e| ToolError::failed(format!("attachment not kept: {e}")))?;
        attachment.url = Some(format!("{STORED}{key}"));
    }
    ctx.restore_attachments(attachments);
    Ok(())
}

/// A model whose calls get the stored attachments of the transcript inline.
struct ReadBack {
    inner: Rc<dyn Model>,
    store: Rc<dyn ObjectStore>,
}

/// The key of a stored attachment.
fn stored_key(attachment: &Attachment) -> Option<&str> {
    attachment.url.as_deref()?.strip_prefix(STORED)
}

fn attachments_mut(message: &mut Message) -> &mut [Attachment] {
    match message {
        Message::User { attachments, .. } | Message::Tool { attachments, .. } => attachments,
        _ => &mut [],
    }
}

impl Model for ReadBack {
    fn generate<'a>(
        &'a self,
        request: ModelRequest<'a>,
        on_delta: &'a mut dyn FnMut(Delta),
    ) -> LocalBoxFuture<'a, Result<ModelTurn, ProviderError>> {
        Box::pin(async move {
            let stored = |m: &Message| match m {
                Message::User { attachments, .. } | Message::Tool { attachments, .. } => {
                    attachments.iter().any(|a| stored_key(a).is_some())
                }
                _ => false,
            };
            if !request.messages.iter().any(stored) {
                return self.inner.generate(request, on_delta).await;
            }
            let mut messages = request.messages.to_vec();
            for attachment in messages.iter_mut().flat_map(attachments_mut) {
                let Some(key) = stored_key(attachment) else {
                    continue;
                };
                let read = self.store.get(key, None).await;
                let bytes = match read {
                    Ok(Some(object)) => object.bytes,
                    Ok(None) => return Err(unreadable(key, "it is not in the store".into())),
                    Err(e) => return Err(unreadable(key, e)),
                };
                let data = String::from_utf8(bytes)
                    .map_err(|_| unreadable(key, "it is not base64 text".into()))?;
                attachment.url = None;
                attachment.data = Some(data);
            }
            let request = ModelRequest {
                messages: &messages,
                ..request
            };
            self.inner.generate(request, on_delta).await
        })
    }
}

/// The model call's error when stored attachment `key` cannot be read back.
fn unreadable(key: &str, why: String) -> ProviderError {
    ProviderError::Network(format!(
        "stored attachment '{key}' could not be read: {why}"
    ))
}
