//! A blocking HTTP client for the stand-in (`ureq`): the response as a test reads it, with the
//! stand-in's own figures from its response headers.

use std::sync::OnceLock;
use std::time::Duration;

use serde_json::Value;

use crate::{
    Answer, CACHED_BYTES_HEADER, CONTENT_HEADER, Refused, Response, SECTION_HEADER, SESSION_HEADER,
    TOTAL_BYTES_HEADER, Usage, url,
};

/// Posts a serialized request to the stand-in through a real HTTP client (`ureq`), keyed by
/// `session`, announcing the route's deferred section size: the response as received. `Err`
/// only for a transport failure (status 0).
pub fn post(
    session: &str,
    section_bytes: u32,
    body: &str,
    headers: &[(String, String)],
) -> Result<Response, Refused> {
    post_to("/v1/messages", session, section_bytes, body, headers)
}

/// [`post`] to another path of the stand-in (a chat path, [`crate::chat::PATHS`], or
/// [`crate::responses::PATH`]). A chat answer's [`CONTENT_HEADER`] is its assistant message,
/// the one element of [`Response::content`]; a Responses answer's is its `output` items.
pub fn post_to(
    path: &str,
    session: &str,
    section_bytes: u32,
    body: &str,
    headers: &[(String, String)],
) -> Result<Response, Refused> {
    let base = url().strip_suffix("/v1/messages").unwrap_or(url());
    let mut call = agent()
        .post(format!("{base}{path}"))
        .header(SESSION_HEADER, session)
        .header(SECTION_HEADER, section_bytes.to_string());
    for (name, value) in headers {
        call = call.header(name, value);
    }
    let transport = |e: ureq::Error| Refused {
        status: 0,
        message: e.to_string(),
        code: None,
    };
    let mut response = call.send(body).map_err(transport)?;
    let status = response.status().as_u16();
    let head = |name: &str| {
        response
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let number = |name: &str| head(name).and_then(|v| v.parse::<u64>().ok());
    let bytes = number(TOTAL_BYTES_HEADER).zip(number(CACHED_BYTES_HEADER));
    let content = match head(CONTENT_HEADER).map(|v| serde_json::from_str(&v)) {
        None => Vec::new(),
        Some(Ok(Value::Array(content))) => content,
        Some(Ok(message)) => vec![message],
        Some(Err(e)) => panic!("the content header is not JSON: {e}"),
    };
    let content_type = head("content-type").unwrap_or_default();
    let body = response.body_mut().read_to_string().map_err(transport)?;
    Ok(Response {
        status,
        content_type,
        body,
        bytes,
        content,
    })
}

/// [`post`], the answer read from its JSON body: the stand-in's own tests.
pub fn send(
    session: &str,
    section_bytes: u32,
    body: &str,
    headers: &[(String, String)],
) -> Result<Answer, Refused> {
    let response = post(session, section_bytes, body, headers)?;
    let (status, text) = (response.status, &response.body);
    let reply: Value = serde_json::from_str(text).map_err(|e| Refused {
        status,
        message: format!("reply is not JSON ({e}): {text}"),
        code: None,
    })?;
    if status != 200 {
        let message = reply
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or(text)
            .to_owned();
        let code = reply
            .pointer("/error/details/error_code")
            .and_then(Value::as_str)
            .map(str::to_owned);
        return Err(Refused {
            status,
            message,
            code,
        });
    }
    let n = |pointer: &str| reply.pointer(pointer).and_then(Value::as_u64).unwrap();
    let array = |key: &str| reply[key].as_array().cloned().unwrap_or_default();
    let content = array("content");
    assert_eq!(
        content, response.content,
        "{CONTENT_HEADER} is the body's content"
    );
    let (total_bytes, cached_bytes) = response.bytes.expect("the byte headers");
    Ok(Answer {
        usage: Usage {
            total_bytes,
            cached_bytes,
            input_tokens: n("/usage/input_tokens"),
            cache_read_input_tokens: n("/usage/cache_read_input_tokens"),
        },
        text: content
            .iter()
            .find(|b| b["type"] == "text")
            .and_then(|b| b["text"].as_str())
            .unwrap_or_default()
            .to_owned(),
        content,
        input_transformations: array("input_transformations"),
    })
}

/// One HTTP client for the process: no proxy (loopback), no redirects, no retries (ureq never
/// retries), a timeout so a stuck stand-in fails the test instead of hanging it.
fn agent() -> &'static ureq::Agent {
    static AGENT: OnceLock<ureq::Agent> = OnceLock::new();
    AGENT.get_or_init(|| {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .max_redirects(0)
            .timeout_global(Some(Duration::from_secs(20)))
            .build()
            .into()
    })
}
