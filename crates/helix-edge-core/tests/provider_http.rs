//! Retry and timeout behaviour of `HttpModel` against a real HTTP server on loopback
//! that answers 429 with Retry-After, 500, hangs, cuts the stream mid-way, or rejects
//! the key. The transport is plain std sockets (the platform's is the Workers fetch).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // Tests fail by panicking.

use futures::future::LocalBoxFuture;
use helix_edge_core::error::ProviderError;
use helix_edge_core::message::Message;
use helix_edge_core::model::{Delta, Model, ModelRequest, ModelSettings, ModelTurn};
use helix_edge_core::provider::{
    BodyStream, HttpModel, HttpRequest, HttpResponse, ProviderConfig, Transport, TransportError,
};
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const KEY: &str = "sk-secret-test-key-123";

/// What the server does with one request.
#[derive(Clone)]
enum Reply {
    Status(u16, &'static str, &'static str),
    Hang,
    Cut(&'static str),
    Stream(&'static str),
    /// A text answer of this many bytes, in 64 KiB deltas, until the client hangs up.
    Huge(usize),
}

const OK_STREAM: &str = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hello\"}}]}\n\n\
                         data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
                         data: [DONE]\n\n";

/// A loopback server that answers requests from a script, one connection each.
struct Server {
    url: String,
    requests: Arc<Mutex<Vec<String>>>,
    _stop: mpsc::Sender<()>,
}

fn serve(script: Vec<Reply>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (stop, stopped) = mpsc::channel::<()>();
    let seen = requests.clone();
    thread::spawn(move || {
        let mut held = Vec::new(); // hung connections stay open until the test ends
        for (reply, conn) in script.into_iter().zip(listener.incoming()) {
            let mut conn = conn.unwrap();
            seen.lock().unwrap().push(read_request(&mut conn));
            match reply {
                Reply::Status(code, headers, body) => {
                    let head = format!(
                        "HTTP/1.1 {code} X\r\ncontent-length: {}\r\n{headers}connection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = conn.write_all(format!("{head}{body}").as_bytes());
                }
                Reply::Hang => held.push(conn),
                Reply::Cut(partial) => {
                    let _ = conn.write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n{partial}"
                        )
                        .as_bytes(),
                    );
                }
                Reply::Huge(mut left) => {
                    let _ = conn
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n");
                    let piece = "x".repeat(64 * 1024);
                    let event = format!(
                        "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":\"{piece}\"}}}}]}}\n\n"
                    );
                    let mut sent = 0;
                    while left > 0 && conn.write_all(event.as_bytes()).is_ok() {
                        left = left.saturating_sub(piece.len());
                        sent += piece.len();
                    }
                    seen.lock().unwrap().push(format!("sent {sent}"));
                }
                Reply::Stream(body) => {
                    let _ = conn
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n");
                    for piece in body.as_bytes().chunks(17) {
                        let _ = conn.write_all(piece);
                        let _ = conn.flush();
                    }
                }
            }
        }
        let _ = stopped.recv_timeout(Duration::from_secs(30));
        drop(held);
    });
    Server {
        url,
        requests,
        _stop: stop,
    }
}

fn read_request(conn: &mut TcpStream) -> String {
    conn.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = Vec::new();
    let mut byte = [0u8; 1024];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = conn.read(&mut byte).unwrap();
        buf.extend_from_slice(&byte[..n]);
    }
    let text = String::from_utf8_lossy(&buf).to_string();
    let length: usize = text
        .lines()
        .find_map(|l| {
            l.to_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let head_len = text.find("\r\n\r\n").unwrap() + 4;
    while buf.len() < head_len + length {
        let n = conn.read(&mut byte).unwrap();
        buf.extend_from_slice(&byte[..n]);
    }
    String::from_utf8_lossy(&buf).to_string()
}

/// HTTP/1.1 over std sockets; timeouts from socket read timeouts.
struct SocketTransport;

struct SocketBody(TcpStream, Vec<u8>);

fn io_error(e: std::io::Error) -> TransportError {
    match e.kind() {
        ErrorKind::WouldBlock | ErrorKind::TimedOut => TransportError::Timeout,
        _ => TransportError::Network(e.to_string()),
    }
}

impl BodyStream for SocketBody {
    fn next(&mut self) -> LocalBoxFuture<'_, Option<Result<Vec<u8>, TransportError>>> {
        Box::pin(async move {
            if !self.1.is_empty() {
                return Some(Ok(std::mem::take(&mut self.1)));
            }
            let mut buf = [0u8; 4096];
            match self.0.read(&mut buf) {
                Ok(0) => None,
                Ok(n) => Some(Ok(buf[..n].to_vec())),
                Err(e) => Some(Err(io_error(e))),
            }
        })
    }
}

impl Transport for SocketTransport {
    fn send<'a>(
        &'a self,
        req: &'a HttpRequest,
        timeout: Duration,
    ) -> LocalBoxFuture<'a, Result<HttpResponse, TransportError>> {
        Box::pin(async move {
            let rest = req.url.strip_prefix("http://").unwrap();
            let (host, path) = rest.split_at(rest.find('/').unwrap());
            let mut conn = TcpStream::connect(host).map_err(io_error)?;
            conn.set_read_timeout(Some(timeout)).unwrap();
            let headers: String = req
                .headers
                .iter()
                .map(|(k, v)| format!("{k}: {v}\r\n"))
                .collect();
            let head = format!(
                "{} {path} HTTP/1.1\r\nhost: {host}\r\ncontent-length: {}\r\nconnection: close\r\n{headers}\r\n",
                req.method.as_str(),
                req.body.len()
            );
            conn.write_all(head.as_bytes()).map_err(io_error)?;
            conn.write_all(req.body.as_bytes()).map_err(io_error)?;
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let split = loop {
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i;
                }
                match conn.read(&mut chunk) {
                    Ok(0) => {
                        return Err(TransportError::Network("closed before the headers".into()));
                    }
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    Err(e) => return Err(io_error(e)),
                }
            };
            let head = String::from_utf8_lossy(&buf[..split]).to_string();
            let status = head.split(' ').nth(1).unwrap().parse().unwrap();
            let headers = head
                .lines()
                .skip(1)
                .filter_map(|l| {
                    l.split_once(':')
                        .map(|(k, v)| (k.trim().to_lowercase(), v.trim().to_string()))
                })
                .collect();
            Ok(HttpResponse {
                status,
                headers,
                body: Box::new(SocketBody(conn, buf[split + 4..].to_vec())),
            })
        })
    }
    fn sleep(&self, wait: Duration) -> LocalBoxFuture<'_, ()> {
        thread::sleep(wait);
        Box::pin(async {})
    }
    fn now_ms(&self) -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64
    }
    fn random(&self) -> f64 {
        0.5
    }
    fn warn(&self, _: &str) {}
}

fn model(server: &Server, tune: impl FnOnce(&mut ProviderConfig)) -> HttpModel<SocketTransport> {
    let vars = [
        ("LLM_PROVIDER", "openai"),
        ("LLM_BASE_URL", server.url.as_str()),
        ("LLM_API_KEY", KEY),
    ];
    let mut config = ProviderConfig::from_vars(|k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    })
    .unwrap();
    config.retry_base = Duration::from_millis(20);
    config.request_timeout = Duration::from_millis(400);
    tune(&mut config);
    HttpModel::new(config, SocketTransport)
}

fn run(model: &HttpModel<SocketTransport>) -> (Result<ModelTurn, ProviderError>, Vec<Delta>) {
    let settings = ModelSettings::default();
    let messages = [Message::user("hi")];
    let request = ModelRequest {
        system: "s".into(),
        messages: &messages,
        tools: vec![],
        settings: &settings,
        options: None,
        session_id: "s1",
        abort: Default::default(),
    };
    let mut deltas = Vec::new();
    let turn = futures::executor::block_on(model.generate(request, &mut |d| deltas.push(d)));
    (turn, deltas)
}

#[test]
fn a_429_is_retried_after_its_retry_after() {
    let server = serve(vec![
        Reply::Status(429, "retry-after: 1\r\n", "{}"),
        Reply::Stream(OK_STREAM),
    ]);
    let started = Instant::now();
    let (turn, _) = run(&model(&server, |_| {}));
    assert_eq!(turn.unwrap().text, "Hello");
    assert!(
        started.elapsed() >= Duration::from_millis(1000),
        "waited {:?}",
        started.elapsed()
    );
    assert_eq!(server.requests.lock().unwrap().len(), 2);
    let first = &server.requests.lock().unwrap()[0];
    assert!(
        first.contains("POST /v1/chat/completions")
            && first.contains(&format!("authorization: Bearer {KEY}"))
    );
}

#[test]
fn server_errors_are_retried_with_backoff_up_to_the_limit() {
    let server = serve(vec![
        Reply::Status(500, "", ""),
        Reply::Status(503, "", ""),
        Reply::Stream(OK_STREAM),
    ]);
    assert_eq!(run(&model(&server, |_| {})).0.unwrap().text, "Hello");
    assert_eq!(server.requests.lock().unwrap().len(), 3);

    let server = serve(vec![Reply::Status(500, "", ""); 4]);
    let (turn, _) = run(&model(&server, |_| {}));
    assert_eq!(turn, Err(ProviderError::Unavailable { status: 500 }));
    assert_eq!(
        server.requests.lock().unwrap().len(),
        4,
        "1 attempt + 3 retries"
    );
}

#[test]
fn a_hung_request_times_out_and_is_retried() {
    let server = serve(vec![Reply::Hang, Reply::Stream(OK_STREAM)]);
    let started = Instant::now();
    assert_eq!(run(&model(&server, |_| {})).0.unwrap().text, "Hello");
    assert!(started.elapsed() >= Duration::from_millis(400));

    let server = serve(vec![Reply::Hang, Reply::Hang]);
    let (turn, _) = run(&model(&server, |c| c.max_retries = 1));
    assert_eq!(turn, Err(ProviderError::Timeout));
}

#[test]
fn a_stream_cut_after_output_is_not_retried() {
    let partial =
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\ndata: {\"choi";
    let server = serve(vec![Reply::Cut(partial), Reply::Stream(OK_STREAM)]);
    let (turn, deltas) = run(&model(&server, |_| {}));
    assert_eq!(turn, Err(ProviderError::Truncated));
    assert_eq!(deltas, [Delta::Text("Hel".into())]);
    assert_eq!(
        server.requests.lock().unwrap().len(),
        1,
        "clients saw output: no retry"
    );
}

#[test]
fn a_stream_cut_before_any_output_is_retried() {
    let server = serve(vec![Reply::Cut("data: {\"choi"), Reply::Stream(OK_STREAM)]);
    assert_eq!(run(&model(&server, |_| {})).0.unwrap().text, "Hello");
    assert_eq!(server.requests.lock().unwrap().len(), 2);
}

#[test]
fn auth_and_request_errors_are_not_retried_and_never_leak_the_key() {
    let body = Box::leak(
        format!("{{\"error\":{{\"message\":\"Incorrect API key provided: {KEY}\"}}}}")
            .into_boxed_str(),
    );
    let server = serve(vec![Reply::Status(401, "", body)]);
    let (turn, _) = run(&model(&server, |_| {}));
    assert_eq!(turn, Err(ProviderError::Auth { status: 401 }));
    assert_eq!(server.requests.lock().unwrap().len(), 1);

    let server = serve(vec![Reply::Status(400, "", body)]);
    let err = run(&model(&server, |_| {})).0.unwrap_err();
    assert_eq!(
        err,
        ProviderError::BadRequest {
            message: "Incorrect API key provided: [redacted]".into()
        }
    );
    assert!(!format!("{err} {err:?}").contains(KEY));
}

#[test]
fn a_retry_after_beyond_the_limit_or_the_deadline_fails_at_once() {
    let server = serve(vec![Reply::Status(429, "retry-after: 120\r\n", "")]);
    let started = Instant::now();
    let (turn, _) = run(&model(&server, |_| {}));
    assert_eq!(
        turn,
        Err(ProviderError::RateLimited {
            retry_after_ms: Some(120_000)
        })
    );
    assert!(started.elapsed() < Duration::from_secs(5));

    let server = serve(vec![Reply::Status(503, "", ""), Reply::Status(503, "", "")]);
    let (turn, _) = run(&model(&server, |c| {
        c.retry_base = Duration::from_millis(2_000);
        c.deadline = Duration::from_millis(1_000);
    }));
    assert_eq!(turn, Err(ProviderError::Unavailable { status: 503 }));
    assert_eq!(
        server.requests.lock().unwrap().len(),
        1,
        "the backoff would pass the deadline"
    );
}

#[test]
fn a_ten_megabyte_answer_fails_at_the_output_limit_without_reading_the_rest() {
    use helix_edge_core::provider::MAX_OUTPUT_BYTES;
    let server = serve(vec![Reply::Huge(10 << 20)]);
    let (turn, deltas) = run(&model(&server, |_| {}));
    assert_eq!(
        turn,
        Err(ProviderError::TooLarge {
            limit: MAX_OUTPUT_BYTES
        })
    );
    let streamed: usize = deltas
        .iter()
        .map(|d| match d {
            Delta::Text(t) => t.len(),
            Delta::Thinking { content, .. } => content.len(),
        })
        .sum();
    assert!(streamed <= MAX_OUTPUT_BYTES, "{streamed} bytes streamed");
    let requests = server.requests.lock().unwrap().clone();
    let calls = requests.iter().filter(|r| !r.starts_with("sent ")).count();
    assert_eq!(calls, 1, "not retried");
    // The client hung up: the server could not send all 10 MB.
    let deadline = Instant::now() + Duration::from_secs(10);
    let sent = loop {
        if let Some(line) = server
            .requests
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.starts_with("sent "))
        {
            break line[5..].parse::<usize>().unwrap();
        }
        assert!(
            Instant::now() < deadline,
            "the server never stopped sending"
        );
        thread::sleep(Duration::from_millis(20));
    };
    assert!(sent < 10 << 20, "the server sent all {sent} bytes");
}
