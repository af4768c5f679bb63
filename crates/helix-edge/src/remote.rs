//! Remote sub-agents on the Workers runtime (feature `remote-subagents`): the HTTP
//! exchange with another deployment ([`RemoteHttp`] over `fetch`, with a timeout and a
//! size bound) and the vars and secrets that name it. What the exchanges are is the
//! core's ([`ApiRemotes`]).

use crate::runner::waits::{ApiRemotes, RemoteError, RemoteHttp};
use crate::runner::{Runner, WaitKind};
use crate::sqlite::SqliteStreamLog;
use crate::storage::ObjectStore;
use futures::future::{Either, LocalBoxFuture, select};
use futures::pin_mut;
use std::rc::Rc;
use std::time::Duration;
use worker::wasm_bindgen::JsValue;
use worker::{AbortController, Delay, Env, Fetch, Headers};

/// How long one request to a remote may take, body included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The largest answer read from a remote (its stream's backlog included).
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// Lets `runner` run remote sub-agent calls, relaying into `stream`.
pub(crate) fn register(
    runner: Runner<ObjectStore>,
    env: &Env,
    stream: &Rc<SqliteStreamLog>,
) -> Runner<ObjectStore> {
    let remotes = ApiRemotes::new(Fetcher(env.clone()), stream.clone());
    runner.with_waits([WaitKind::remote(Rc::new(remotes))])
}

/// `fetch`, with the deployment's vars and secrets.
struct Fetcher(Env);

fn too_large() -> RemoteError {
    RemoteError::Invalid(format!("it answered more than {MAX_ANSWER_BYTES} bytes"))
}

impl RemoteHttp for Fetcher {
    fn var(&self, name: &str) -> Option<String> {
        let value = self
            .0
            .secret(name)
            .map(|s| s.to_string())
            .or_else(|_| self.0.var(name).map(|v| v.to_string()))
            .ok()?;
        Some(value.trim().to_string()).filter(|v| !v.is_empty())
    }

    fn send<'a>(
        &'a self,
        method: &'a str,
        url: String,
        headers: Vec<(&'static str, String)>,
        body: Option<String>,
    ) -> LocalBoxFuture<'a, Result<(u16, String), RemoteError>> {
        Box::pin(async move {
            let network = |e: worker::Error| RemoteError::Unavailable(e.to_string());
            let set = Headers::new();
            for (name, value) in &headers {
                set.set(name, value).map_err(network)?;
            }
            let body = body.map(|b| JsValue::from_str(&b));
            let request = crate::outgoing::unredirected(&url, method, &set, body)
                .map_err(|e| RemoteError::Unavailable(format!("{url} is not a usable URL: {e}")))?;
            let controller = AbortController::default();
            let signal = controller.signal();
            let exchange = async {
                let mut response = Fetch::Request(request)
                    .send_with_signal(&signal)
                    .await
                    .map_err(network)?;
                let status = response.status_code();
                let declared = response.headers().get("content-length").ok().flatten();
                if declared.and_then(|n| n.parse::<usize>().ok()).unwrap_or(0) > MAX_ANSWER_BYTES {
                    return Err(too_large());
                }
                let body = response.text().await.map_err(network)?;
                if body.len() > MAX_ANSWER_BYTES {
                    return Err(too_large());
                }
                Ok((status, body))
            };
            let timer = Delay::from(REQUEST_TIMEOUT);
            pin_mut!(exchange);
            match select(exchange, timer).await {
                Either::Left((answer, _)) => answer,
                Either::Right(_) => {
                    controller.abort();
                    Err(RemoteError::Unavailable(format!(
                        "no answer within {} s",
                        REQUEST_TIMEOUT.as_secs()
                    )))
                }
            }
        })
    }
}
