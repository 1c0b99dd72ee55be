//! One expected request and its answer.

use std::fmt::Write as _;

use http::Method;
use serde::Serialize;
use serde_json::Value;

use crate::watch::WatchStream;

/// An expected request and the answer the script gives it. Made with
/// [`get`], [`patch`], [`post`], [`put`] or [`delete`] and a path, which
/// may carry query parameters (`?watch=true&fieldManager=x`): each must be
/// in the request, which may carry others.
pub struct Exchange {
    method: Method,
    path: String,
    query: Vec<(String, String)>,
    checks: Vec<BodyCheck>,
    answer: Answer,
    /// Its place in the script (1-based), for the messages.
    pub(crate) step: usize,
}

enum BodyCheck {
    Includes(Value),
    Lacks(String),
    Holds(String, Box<dyn Fn(&Value) -> bool + Send>),
}

type Compute = Box<dyn FnOnce(&Value) -> (u16, Value) + Send>;

pub(crate) enum Answer {
    Missing,
    Json(u16, Value),
    With(Compute),
    Stream(WatchStream),
}

/// Expects a GET of `path`.
pub fn get(path: &str) -> Exchange {
    Exchange::new(Method::GET, path)
}

/// Expects a PATCH of `path`.
pub fn patch(path: &str) -> Exchange {
    Exchange::new(Method::PATCH, path)
}

/// Expects a POST to `path`.
pub fn post(path: &str) -> Exchange {
    Exchange::new(Method::POST, path)
}

/// Expects a PUT of `path`.
pub fn put(path: &str) -> Exchange {
    Exchange::new(Method::PUT, path)
}

/// Expects a DELETE of `path`.
pub fn delete(path: &str) -> Exchange {
    Exchange::new(Method::DELETE, path)
}

impl Exchange {
    fn new(method: Method, path: &str) -> Self {
        let (path, query) = split_uri(path);
        Exchange {
            method,
            path,
            query,
            checks: Vec::new(),
            answer: Answer::Missing,
            step: 0,
        }
    }

    /// The request must carry query parameter `key` with `value`.
    pub fn query(mut self, key: &str, value: &str) -> Self {
        self.query.push((key.to_owned(), value.to_owned()));
        self
    }

    /// The JSON body must include `fragment`: every key of an object (a
    /// `null` must be there as `null`, as in a merge patch that removes),
    /// every element of an array (same length, each included in turn),
    /// every other value equal.
    pub fn body_includes(mut self, fragment: Value) -> Self {
        self.checks.push(BodyCheck::Includes(fragment));
        self
    }

    /// The JSON body must have nothing at `pointer` (RFC 6901, e.g.
    /// `/metadata/resourceVersion`).
    pub fn body_lacks(mut self, pointer: &str) -> Self {
        self.checks.push(BodyCheck::Lacks(pointer.to_owned()));
        self
    }

    /// The JSON body must satisfy `holds`, described as `what` in a failure.
    pub fn body_where(
        mut self,
        what: &str,
        holds: impl Fn(&Value) -> bool + Send + 'static,
    ) -> Self {
        self.checks
            .push(BodyCheck::Holds(what.to_owned(), Box::new(holds)));
        self
    }

    /// Answers with `status` and `body` as JSON.
    pub fn answer(mut self, status: u16, body: &impl Serialize) -> Self {
        self.answer = match serde_json::to_value(body) {
            Ok(v) => Answer::Json(status, v),
            Err(e) => panic!("the scripted answer is not JSON: {e}"),
        };
        self
    }

    /// Answers 200 with `body` as JSON.
    pub fn ok(self, body: &impl Serialize) -> Self {
        self.answer(200, body)
    }

    /// Answers with a failure `Status` of `code` and `reason` (`Conflict`,
    /// `NotFound`, ...), as the API server does.
    pub fn fails(mut self, code: u16, reason: &str) -> Self {
        let message = format!("scripted failure: {reason}");
        self.answer = Answer::Json(code, crate::status_failure(code, reason, &message));
        self
    }

    /// Answers with what `compute` makes of the request's JSON body (for
    /// an answer that echoes the write, as the API server's does). It runs
    /// as the request is matched, with the script locked.
    pub fn answer_with(
        mut self,
        compute: impl FnOnce(&Value) -> (u16, Value) + Send + 'static,
    ) -> Self {
        self.answer = Answer::With(Box::new(compute));
        self
    }

    /// Answers 200 with a watch stream: the events the test sends into the
    /// [`crate::WatchFeed`] of `stream`, open as long as that feed is.
    pub fn streams(mut self, stream: WatchStream) -> Self {
        self.answer = Answer::Stream(stream);
        self
    }

    pub(crate) fn take_answer(&mut self) -> Answer {
        std::mem::replace(&mut self.answer, Answer::Missing)
    }

    /// Same method, path and expected query parameters?
    pub(crate) fn routes(&self, request: &Seen) -> bool {
        self.method == request.method
            && self.path == request.path
            && self
                .query
                .iter()
                .all(|want| request.query.iter().any(|have| have == want))
    }

    /// Why `body` does not pass the checks, if it does not.
    pub(crate) fn body_mismatch(&self, body: &Value) -> Option<String> {
        self.checks.iter().find_map(|check| match check {
            BodyCheck::Includes(fragment) => includes(body, fragment, "").err(),
            BodyCheck::Lacks(pointer) => body
                .pointer(pointer)
                .map(|found| format!("{pointer}: expected nothing, found {found}")),
            BodyCheck::Holds(what, holds) => (!holds(body)).then(|| format!("not {what}")),
        })
    }
}

impl std::fmt::Display for Exchange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {}: {} {}", self.step, self.method, self.path)?;
        let query: Vec<String> = self.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if !query.is_empty() {
            write!(f, "?{}", query.join("&"))?;
        }
        for check in &self.checks {
            match check {
                BodyCheck::Includes(v) => write!(f, "\n      body includes {v}")?,
                BodyCheck::Lacks(p) => write!(f, "\n      body lacks {p}")?,
                BodyCheck::Holds(what, _) => write!(f, "\n      body {what}")?,
            }
        }
        Ok(())
    }
}

/// A request as the scripted API received it.
pub(crate) struct Seen {
    pub method: Method,
    pub path: String,
    pub query: Vec<(String, String)>,
    /// The JSON body (`null` when empty, a string when not JSON).
    pub body: Value,
}

impl Seen {
    pub fn new(method: Method, uri: &http::Uri, body: &[u8]) -> Self {
        let (path, query) = split_uri(&uri.to_string());
        let body = if body.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(body)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
        };
        Seen {
            method,
            path,
            query,
            body,
        }
    }
}

impl std::fmt::Display for Seen {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.method, self.path)?;
        let query: Vec<String> = self.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if !query.is_empty() {
            write!(f, "?{}", query.join("&"))?;
        }
        if !self.body.is_null() {
            let mut body = self.body.to_string();
            if body.len() > 4000 {
                let mut end = 4000;
                while !body.is_char_boundary(end) {
                    end -= 1;
                }
                body.truncate(end);
                body.push_str("...");
            }
            write!(f, "\n      body {body}")?;
        }
        Ok(())
    }
}

/// A path and its decoded query parameters.
fn split_uri(uri: &str) -> (String, Vec<(String, String)>) {
    let uri = uri
        .strip_prefix("http://")
        .or_else(|| uri.strip_prefix("https://"))
        .map_or(uri, |rest| rest.find('/').map_or("/", |i| &rest[i..]));
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let pairs = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect();
    (path.to_owned(), pairs)
}

/// Percent-decoding of a query component (`+` is a space).
fn decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 2;
                    }
                    Err(_) => out.push(b'%'),
                }
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Does `actual` include `expected` (see [`Exchange::body_includes`])?
/// The error names the first difference by its JSON pointer.
fn includes(actual: &Value, expected: &Value, at: &str) -> Result<(), String> {
    match (expected, actual) {
        (Value::Object(want), Value::Object(have)) => {
            for (key, w) in want {
                let mut here = at.to_owned();
                let _ = write!(here, "/{}", key.replace('~', "~0").replace('/', "~1"));
                match have.get(key) {
                    Some(h) => includes(h, w, &here)?,
                    None => return Err(format!("{here}: expected {w}, found nothing")),
                }
            }
            Ok(())
        }
        (Value::Array(want), Value::Array(have)) => {
            if want.len() != have.len() {
                return Err(format!(
                    "{}: expected {} elements, found {}: {actual}",
                    pointer_or_root(at),
                    want.len(),
                    have.len()
                ));
            }
            for (i, (w, h)) in want.iter().zip(have).enumerate() {
                includes(h, w, &format!("{at}/{i}"))?;
            }
            Ok(())
        }
        (w, h) if w == h => Ok(()),
        (w, h) => Err(format!("{}: expected {w}, found {h}", pointer_or_root(at))),
    }
}

fn pointer_or_root(at: &str) -> &str {
    if at.is_empty() { "the body" } else { at }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_fragment_is_included_key_by_key_and_a_null_must_be_there() {
        let body =
            json!({"spec": {"unschedulable": null, "x": 1}, "metadata": {"labels": {"a/b": "1"}}});
        assert!(includes(&body, &json!({"spec": {"unschedulable": null}}), "").is_ok());
        assert_eq!(
            includes(&body, &json!({"metadata": {"labels": {"a/b": "2"}}}), ""),
            Err("/metadata/labels/a~1b: expected \"2\", found \"1\"".to_owned())
        );
        assert_eq!(
            includes(&body, &json!({"metadata": {"annotations": null}}), ""),
            Err("/metadata/annotations: expected null, found nothing".to_owned())
        );
        assert!(includes(&json!([1, {"a": 1, "b": 2}]), &json!([1, {"a": 1}]), "").is_ok());
        assert!(includes(&json!([1, 2]), &json!([1]), "").is_err());
    }

    #[test]
    fn a_path_carries_its_decoded_query() {
        let (path, query) =
            split_uri("/api/v1/nodes?fieldSelector=metadata.name%3Dn-1&force=true&a=b+c");
        assert_eq!(path, "/api/v1/nodes");
        assert_eq!(
            query,
            [
                ("fieldSelector".to_owned(), "metadata.name=n-1".to_owned()),
                ("force".to_owned(), "true".to_owned()),
                ("a".to_owned(), "b c".to_owned()),
            ]
        );
        let exchange = get("/api/v1/nodes?force=true");
        let seen = Seen::new(
            Method::GET,
            &http::Uri::from_static("/api/v1/nodes?&force=true&watch=1"),
            b"",
        );
        assert!(exchange.routes(&seen));
        assert!(!get("/api/v1/nodes?force=false").routes(&seen));
    }
}
