//! The AI SDK's chat protocol (`useChat` with `DefaultChatTransport`): what its request
//! asks for ([`ChatRequest`]), and a session's stream as its UI message stream
//! ([`UiStream`]). The worker's `POST /v1/chat` and `GET /v1/chat/{id}/stream` are built
//! on these.

mod files;
mod parts;
mod request;
mod ui;

pub use request::{ChatAnswer, ChatRequest, ChatTurn};
pub use ui::{UI_DONE, UiStream};
