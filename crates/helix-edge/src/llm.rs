//! The model providers on the Workers runtime: a [`Transport`] over `fetch` with
//! streamed body reads, timeouts (headers and every silence between chunks) and abort,
//! and the choice of model from the deployment's vars.

use crate::error::ProviderError;
use crate::model::{Model, ModelSettings, Models};
use crate::provider::{
    BodyStream, HttpModel, HttpRequest, HttpResponse, ProviderConfig, ProviderKind, Transport,
    TransportError,
};
use futures::future::{Either, LocalBoxFuture, select};
use futures::{StreamExt, pin_mut};
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen::JsValue;
use worker::{AbortController, ByteStream, Delay, Fetch, Headers, Request};

/// HTTP through the Workers `fetch`.
pub struct FetchTransport;

/// A body being read, with the controller that cancels the fetch behind it.
struct FetchBody {
    stream: ByteStream,
    controller: Option<AbortController>,
    timeout: Duration,
}

impl FetchBody {
    fn cancel(&mut self) {
        if let Some(controller) = self.controller.take() {
            controller.abort();
        }
    }
}

impl BodyStream for FetchBody {
    fn next(&mut self) -> LocalBoxFuture<'_, Option<Result<Vec<u8>, TransportError>>> {
        Box::pin(async move {
            let next = self.stream.next();
            let timer = Delay::from(self.timeout);
            pin_mut!(next);
            match select(next, timer).await {
                Either::Left((Some(Ok(chunk)), _)) => Some(Ok(chunk)),
                Either::Left((Some(Err(e)), _)) => {
                    self.cancel();
                    Some(Err(TransportError::Network(e.to_string())))
                }
                Either::Left((None, _)) => None,
                Either::Right(_) => {
                    self.cancel();
                    Some(Err(TransportError::Timeout))
                }
            }
        })
    }
}

impl Drop for FetchBody {
    fn drop(&mut self) {
        self.cancel();
    }
}

fn build(request: &HttpRequest) -> worker::Result<Request> {
    let headers = Headers::new();
    for (name, value) in &request.headers {
        headers.set(name, value)?;
    }
    crate::http::request(
        &request.url,
        "POST",
        &headers,
        Some(JsValue::from_str(&request.body)),
    )
}

impl Transport for FetchTransport {
    fn send<'a>(
        &'a self,
        request: &'a HttpRequest,
        timeout: Duration,
    ) -> LocalBoxFuture<'a, Result<HttpResponse, TransportError>> {
        Box::pin(async move {
            let req = build(request).map_err(|e| TransportError::Network(e.to_string()))?;
            let controller = AbortController::default();
            let signal = controller.signal();
            let fetch = Fetch::Request(req);
            let sent = fetch.send_with_signal(&signal);
            let timer = Delay::from(timeout);
            pin_mut!(sent);
            let mut response = match select(sent, timer).await {
                Either::Left((Ok(response), _)) => response,
                Either::Left((Err(e), _)) => return Err(TransportError::Network(e.to_string())),
                Either::Right(_) => {
                    controller.abort();
                    return Err(TransportError::Timeout);
                }
            };
            let mut headers = Vec::new();
            for name in ["retry-after", "retry-after-ms", "content-type"] {
                if let Ok(Some(value)) = response.headers().get(name) {
                    headers.push((name.to_string(), value));
                }
            }
            let stream = response
                .stream()
                .map_err(|e| TransportError::Network(e.to_string()))?;
            Ok(HttpResponse {
                status: response.status_code(),
                headers,
                body: Box::new(FetchBody {
                    stream,
                    controller: Some(controller),
                    timeout,
                }),
            })
        })
    }

    fn sleep(&self, wait: Duration) -> LocalBoxFuture<'_, ()> {
        Box::pin(Delay::from(wait))
    }

    fn now_ms(&self) -> u64 {
        worker::Date::now().as_millis()
    }

    fn random(&self) -> f64 {
        worker::js_sys::Math::random()
    }

    fn warn(&self, message: &str) {
        worker::console_warn!("{}", message);
    }
}

/// Picks each agent's model from the deployment's provider configuration.
pub struct PlatformModels {
    config: Result<ProviderConfig, ProviderError>,
}

impl PlatformModels {
    /// Reads the SPEC §6 vars and secrets from `env`.
    pub fn from_env(env: &worker::Env) -> Self {
        let config = ProviderConfig::from_vars(|name| {
            env.secret(name)
                .map(|s| s.to_string())
                .or_else(|_| env.var(name).map(|v| v.to_string()))
                .ok()
        });
        Self { config }
    }
}

impl Models for PlatformModels {
    fn model_for(&self, settings: &ModelSettings) -> Result<Rc<dyn Model>, ProviderError> {
        let config = self.config.clone()?;
        if config.kind == ProviderKind::Demo || settings.provider.as_deref() == Some("demo") {
            return demo_model();
        }
        Ok(Rc::new(HttpModel::new(config, FetchTransport)))
    }
}

/// The built-in `demo` model.
#[cfg(feature = "demo")]
fn demo_model() -> Result<Rc<dyn Model>, ProviderError> {
    Ok(Rc::new(crate::demo::DemoModel))
}

/// Without the `demo` feature there is no demo model: a deployment with
/// `LLM_PROVIDER=demo` (or no `LLM_API_KEY`) is not configured.
#[cfg(not(feature = "demo"))]
fn demo_model() -> Result<Rc<dyn Model>, ProviderError> {
    Err(ProviderError::NotConfigured(
        "no model provider: set LLM_API_KEY (and LLM_PROVIDER), or build with helix-edge's `demo` feature".into(),
    ))
}
