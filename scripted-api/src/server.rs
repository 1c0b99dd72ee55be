//! The script, the service behind the client, and the test's drivers.

use std::collections::VecDeque;
use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body::Frame;
use tokio::sync::{mpsc, watch};

use crate::exchange::{Answer, Exchange, Seen};

/// How long a driver waits for the code under test (tokio's clock).
pub const LIMIT: Duration = Duration::from_secs(10);

/// Requests that may come in any interleaving, each lane in its order.
struct Stage {
    lanes: Vec<VecDeque<Exchange>>,
}

/// The expected requests and their answers, in order.
#[derive(Default)]
pub struct Script {
    stages: Vec<Stage>,
    steps: usize,
}

impl Script {
    pub fn new() -> Self {
        Script::default()
    }

    fn numbered(&mut self, mut exchange: Exchange) -> Exchange {
        self.steps += 1;
        exchange.step = self.steps;
        exchange
    }

    /// `exchange` comes next, after every request before it.
    pub fn then(mut self, exchange: Exchange) -> Self {
        let exchange = self.numbered(exchange);
        self.stages.push(Stage {
            lanes: vec![VecDeque::from([exchange])],
        });
        self
    }

    /// Concurrent requests: every lane's exchanges come next, each lane's
    /// in its order, the lanes interleaved in any way; all of them before
    /// any request after them.
    pub fn together(mut self, lanes: impl IntoIterator<Item = Vec<Exchange>>) -> Self {
        let lanes: Vec<VecDeque<Exchange>> = lanes
            .into_iter()
            .map(|lane| lane.into_iter().map(|e| self.numbered(e)).collect())
            .filter(|lane: &VecDeque<Exchange>| !lane.is_empty())
            .collect();
        if !lanes.is_empty() {
            self.stages.push(Stage { lanes });
        }
        self
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Progress {
    Running,
    Done,
    Failed,
}

struct State {
    stages: VecDeque<Stage>,
    /// What went wrong, first first.
    failures: Vec<String>,
    /// Every request answered from the script: `METHOD path -> status`.
    transcript: Vec<String>,
}

struct Shared {
    state: Mutex<State>,
    progress: watch::Sender<Progress>,
    /// How many requests the script has answered.
    answered: watch::Sender<usize>,
    /// Each answer waits until the code under test has settled.
    hold: AtomicBool,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The script's answer to `request`, or a failure recorded.
    fn answer(&self, request: &Seen) -> Result<Answer, ()> {
        let mut state = self.lock();
        let outcome = state.take(request);
        let progress = match &outcome {
            Err(failure) => {
                state.failures.push(failure.clone());
                Progress::Failed
            }
            Ok(_) if !state.failures.is_empty() => Progress::Failed,
            Ok(_) if state.stages.is_empty() => Progress::Done,
            Ok(_) => Progress::Running,
        };
        let answered = state.transcript.len();
        drop(state);
        self.answered.send_replace(answered);
        self.progress.send_replace(progress);
        outcome.map_err(|_| ())
    }
}

impl State {
    fn take(&mut self, request: &Seen) -> Result<Answer, String> {
        let Some(stage) = self.stages.front_mut() else {
            return Err(format!(
                "unexpected request after the script's end:\n    {request}"
            ));
        };
        let routed = stage.lanes.iter().position(|lane| {
            lane.front()
                .is_some_and(|e| e.routes(request) && e.body_mismatch(&request.body).is_none())
        });
        let Some(lane) = routed else {
            let expected: Vec<String> = stage
                .lanes
                .iter()
                .filter_map(|lane| lane.front())
                .map(|e| {
                    let why = if e.routes(request) {
                        e.body_mismatch(&request.body)
                            .map(|m| format!("\n      but the body differs: {m}"))
                            .unwrap_or_default()
                    } else {
                        String::new()
                    };
                    format!("    {e}{why}")
                })
                .collect();
            return Err(format!(
                "unexpected request:\n    {request}\n  expected instead:\n{}",
                expected.join("\n")
            ));
        };
        let mut exchange = stage.lanes[lane]
            .pop_front()
            .unwrap_or_else(|| unreachable!("the lane's head was just matched"));
        if stage.lanes[lane].is_empty() {
            stage.lanes.remove(lane);
        }
        if stage.lanes.is_empty() {
            self.stages.pop_front();
        }
        let answer = match exchange.take_answer() {
            Answer::With(compute) => {
                let (code, value) = compute(&request.body);
                Answer::Json(code, value)
            }
            answer => answer,
        };
        let status = match &answer {
            Answer::Missing | Answer::With(_) => {
                return Err(format!("the script gives no answer to {exchange}"));
            }
            Answer::Json(code, _) => code.to_string(),
            Answer::Stream(_) => "200, a watch".to_owned(),
        };
        self.transcript.push(format!(
            "step {}: {} {} -> {status}",
            exchange.step, request.method, request.path
        ));
        Ok(answer)
    }

    fn unmet(&self) -> Vec<String> {
        self.stages
            .iter()
            .flat_map(|s| s.lanes.iter().flatten())
            .map(|e| format!("    {e}"))
            .collect()
    }
}

/// The scripted API: its [`client`](Self::client)s' requests are checked
/// against the script and answered from it. Its drivers end with
/// [`verify`](Self::verify); one dropped unverified fails the test.
pub struct ScriptedApi {
    shared: Arc<Shared>,
    verified: AtomicBool,
}

impl ScriptedApi {
    pub fn new(script: Script) -> Self {
        let progress = if script.stages.is_empty() {
            Progress::Done
        } else {
            Progress::Running
        };
        ScriptedApi {
            shared: Arc::new(Shared {
                state: Mutex::new(State {
                    stages: script.stages.into(),
                    failures: Vec::new(),
                    transcript: Vec::new(),
                }),
                progress: watch::Sender::new(progress),
                answered: watch::Sender::new(0),
                hold: AtomicBool::new(false),
            }),
            verified: AtomicBool::new(false),
        }
    }

    /// Holds each answer until the code under test has [`settled`]: every
    /// request it can make before that answer has come, and is checked
    /// against the script. So concurrency shows: a request made too early
    /// (say, a second wave's while the first is in flight) fails the test
    /// whatever the scheduling. Needs tokio's paused time.
    pub fn answers_when_settled(self) -> Self {
        self.shared.hold.store(true, Ordering::Relaxed);
        self
    }

    /// A client of this API (default namespace `default`). Needs a tokio
    /// runtime.
    pub fn client(&self) -> kube::Client {
        let service = Service {
            shared: Arc::clone(&self.shared),
        };
        kube::Client::new(service, "default")
    }

    async fn reached(&self, wanted: impl Fn(Progress) -> bool) {
        let mut rx = self.shared.progress.subscribe();
        // The sender lives as long as `self`.
        let _ = rx.wait_for(|p| wanted(*p)).await;
    }

    /// Completes once every expected request was answered, or at the first
    /// failure.
    pub async fn done(&self) {
        self.reached(|p| p != Progress::Running).await;
    }

    async fn failed(&self) {
        self.reached(|p| p == Progress::Failed).await;
    }

    /// How many requests the script has answered so far.
    pub fn answered(&self) -> usize {
        *self.shared.answered.borrow()
    }

    /// Completes once the script has answered `n` requests (the test's
    /// cue for its next event), or at the first failure.
    pub async fn until_answered(&self, n: usize) {
        let mut answered = self.shared.answered.subscribe();
        let mut progress = self.shared.progress.subscribe();
        tokio::select! {
            _ = answered.wait_for(|a| *a >= n) => {}
            _ = progress.wait_for(|p| *p == Progress::Failed) => {}
        }
    }

    fn fail_now(&self, why: String) -> ! {
        self.verified.store(true, Ordering::Relaxed);
        panic!("{}", self.report(Some(why)));
    }

    /// Runs `code` (which makes its requests through this API's clients) to
    /// its end, then [`verify`](Self::verify)s. Stops the test at the first
    /// unexpected request, or when `code` has not ended after [`LIMIT`].
    pub async fn finish<F: Future>(&self, code: F) -> F::Output {
        let output = tokio::select! {
            output = code => Some(output),
            () = self.failed() => None,
            () = tokio::time::sleep(LIMIT) => {
                self.fail_now(format!("the code under test did not end within {LIMIT:?}"))
            }
        };
        self.verify();
        output.unwrap_or_else(|| unreachable!("a failure fails the verification"))
    }

    /// Runs `code`, which does not end by itself (a loop), until `until`
    /// completes, then drops it and [`verify`](Self::verify)s. Stops the
    /// test at the first unexpected request, when `code` ends (its output
    /// is reported), or when `until` has not come after [`LIMIT`].
    pub async fn run_until<F>(&self, code: F, until: impl Future<Output = ()>)
    where
        F: Future,
        F::Output: std::fmt::Debug,
    {
        tokio::select! {
            output = code => self.fail_now(format!("the code under test ended: {output:?}")),
            () = until => {}
            () = self.failed() => {}
            () = tokio::time::sleep(LIMIT) => {
                self.fail_now(format!("what the test waited for did not come within {LIMIT:?}"))
            }
        }
        self.verify();
    }

    /// Fails the test unless every expected request came, as expected.
    pub fn verify(&self) {
        self.verified.store(true, Ordering::Relaxed);
        let state = self.shared.lock();
        let ok = state.failures.is_empty() && state.stages.is_empty();
        drop(state);
        if !ok {
            panic!("{}", self.report(None));
        }
    }

    fn report(&self, why: Option<String>) -> String {
        let state = self.shared.lock();
        let mut out = String::from("scripted API:");
        if let Some(why) = why {
            out.push_str(&format!("\n  {why}"));
        }
        for failure in &state.failures {
            out.push_str(&format!("\n  {failure}"));
        }
        let unmet = state.unmet();
        if !unmet.is_empty() {
            out.push_str(&format!(
                "\n  expected requests that never came:\n{}",
                unmet.join("\n")
            ));
        }
        out.push_str("\n  answered before:");
        if state.transcript.is_empty() {
            out.push_str(" nothing");
        }
        for line in &state.transcript {
            out.push_str(&format!("\n    {line}"));
        }
        out
    }
}

impl Drop for ScriptedApi {
    fn drop(&mut self) {
        if !self.verified.load(Ordering::Relaxed) && !std::thread::panicking() {
            panic!(
                "{}",
                self.report(Some("dropped without a verification".to_owned()))
            );
        }
    }
}

/// Waits until every task is idle: the code under test has done all it
/// can without a new event or answer. Needs tokio's paused time (it
/// panics otherwise): a paused clock moves on only when nothing else can
/// run, so this is not a sleep as synchronisation.
pub async fn settled() {
    tokio::time::advance(Duration::ZERO).await;
    tokio::time::sleep(Duration::from_millis(1)).await;
}

/// The service behind the clients.
#[derive(Clone)]
struct Service {
    shared: Arc<Shared>,
}

type Answering = Pin<Box<dyn Future<Output = Result<Response<ScriptBody>, Infallible>> + Send>>;

impl tower::Service<Request<kube::client::Body>> for Service {
    type Response = Response<ScriptBody>;
    type Error = Infallible;
    type Future = Answering;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<kube::client::Body>) -> Answering {
        let shared = Arc::clone(&self.shared);
        Box::pin(async move {
            let (parts, body) = request.into_parts();
            let body = body.collect_bytes().await.unwrap_or_default();
            let seen = Seen::new(parts.method, &parts.uri, &body);
            let answer = shared.answer(&seen);
            if shared.hold.load(Ordering::Relaxed) {
                settled().await;
            }
            let (status, body) = match answer {
                Ok(Answer::Json(status, value)) => (status, ScriptBody::json(&value)),
                Ok(Answer::Stream(stream)) => (200, ScriptBody::Stream(stream.0)),
                Ok(Answer::Missing | Answer::With(_)) | Err(()) => {
                    let message = format!("scripted API: unexpected request {seen}");
                    let value = crate::status_failure(500, "InternalError", &message);
                    (500, ScriptBody::json(&value))
                }
            };
            let response = Response::builder()
                .status(status)
                .header(http::header::CONTENT_TYPE, "application/json")
                .body(body)
                .unwrap_or_else(|e| panic!("a scripted answer: {e}"));
            Ok(response)
        })
    }
}

/// A whole JSON answer, or a watch's events as the test sends them.
enum ScriptBody {
    Full(Option<Bytes>),
    Stream(mpsc::UnboundedReceiver<Bytes>),
}

impl ScriptBody {
    fn json(value: &serde_json::Value) -> Self {
        ScriptBody::Full(Some(Bytes::from(value.to_string())))
    }
}

impl http_body::Body for ScriptBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            ScriptBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            ScriptBody::Stream(events) => {
                events.poll_recv(cx).map(|e| e.map(|b| Ok(Frame::data(b))))
            }
        }
    }
}
