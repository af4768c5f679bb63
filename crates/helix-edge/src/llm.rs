//! The model providers on the Workers runtime: a [`Transport`] over `fetch` with
//! streamed body reads, timeouts (headers and every silence between chunks) and abort;
//! the choice of model is the core's ([`ConfiguredModels`]), from the deployment's vars.

use crate::provider::{
    BodyStream, ConfiguredModels, HttpRequest, HttpResponse, Method, ProviderConfig, Transport,
    TransportError,
};
use futures::future::{Either, LocalBoxFuture, select};
use futures::{StreamExt, pin_mut};
use std::time::Duration;
use worker::wasm_bindgen::JsValue;
use worker::{AbortController, ByteStream, Delay, Fetch, Headers, Request};

/// HTTP through the Workers `fetch`.
#[derive(Clone, Copy)]
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

    /// The end of the body usually arrives right behind the terminal event: when it is
    /// there already (a read settles before a zero timer), the request is over and is
    /// not cancelled — an abort costs the isolate an `AbortError` and its rejections.
    fn finished(&mut self) -> LocalBoxFuture<'_, ()> {
        Box::pin(async move {
            let next = self.stream.next();
            let now = Delay::from(Duration::ZERO);
            pin_mut!(next);
            if let Either::Left((None, _)) = select(next, now).await {
                self.controller = None;
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
    let body = match request.method {
        Method::Get => None,
        Method::Post => Some(JsValue::from_str(&request.body)),
    };
    crate::outgoing::unredirected(&request.url, request.method.as_str(), &headers, body)
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
            for name in [
                "retry-after",
                "retry-after-ms",
                "content-type",
                "mcp-session-id",
                "www-authenticate",
            ] {
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

    fn debug(&self, event: &str, detail: &str) {
        crate::worker_host::log(
            helix_edge_core::host::Level::Debug,
            event,
            serde_json::json!({ "detail": detail }),
        );
    }
}

/// Each agent's model, from the provider configuration in `env`'s vars and secrets.
pub fn models(env: &worker::Env) -> ConfiguredModels<FetchTransport> {
    let config = ProviderConfig::from_vars(|name| {
        env.secret(name)
            .map(|s| s.to_string())
            .or_else(|_| env.var(name).map(|v| v.to_string()))
            .ok()
    });
    ConfiguredModels::new(config, FetchTransport)
}
