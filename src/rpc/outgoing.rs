//! Every JSON message the server writes is built here: replies (the method's result,
//! serialized once, with the client's id spliced in), error replies, and the server's own
//! requests and notifications to the client.

use std::io;
use std::sync::{Arc, Mutex, PoisonError};

use jsonrpsee::MethodResponse;
use jsonrpsee::types::ErrorObjectOwned;
use serde::Serialize;

use crate::rpc::error::{INTERNAL_ERROR, plain, reply_too_large};
use crate::rpc::writer::Reply;

/// What jsonrpsee writes before the payload of a response to `Id::Null`.
const NULL_ID_PREFIX: &str = r#"{"jsonrpc":"2.0","id":null,"#;

/// The response with the request's id as the client wrote it (jsonrpsee's `Id` cannot
/// hold every JSON-RPC id, such as negative or fractional numbers); a reply over `max`
/// bytes is replaced by error 1005.
pub fn with_id(id: &str, response: MethodResponse, max: usize) -> Reply {
    if response.as_error_code() == Some(jsonrpsee::types::error::OVERSIZED_RESPONSE_CODE) {
        return error_reply(Some(id), reply_too_large(max)).into();
    }
    let written = response.is_success().then(|| response.extensions().get::<Arc<Written>>()?.take()).flatten();
    if let Some(mut result) = written {
        result.push('}');
        let reply = Reply::spliced(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#), result, 0);
        if reply.len() > max {
            return error_reply(Some(id), reply_too_large(max)).into();
        }
        return reply;
    }
    let json = String::from(Box::<str>::from(response.into_json()));
    if !json.starts_with(NULL_ID_PREFIX) {
        tracing::error!(response = &*json, "unexpected response layout from the registry");
        return error_reply(Some(id), plain(INTERNAL_ERROR, "internal error: unexpected response layout")).into();
    }
    let reply = Reply::spliced(format!(r#"{{"jsonrpc":"2.0","id":{id},"#), json, NULL_ID_PREFIX.len());
    if reply.len() > max {
        return error_reply(Some(id), reply_too_large(max)).into();
    }
    reply
}

/// A method's result as JSON text, written by the method table's adapter and spliced into
/// the reply by `with_id`. jsonrpsee would serialize the result and then parse the whole
/// text again to check it; a history of 10 MB costs a third less this way. Serializing
/// stops at the reply limit, as jsonrpsee's does.
#[derive(Debug)]
pub struct Written {
    max: usize,
    result: Mutex<Option<String>>,
}

impl Written {
    pub fn new(max: usize) -> Self {
        Written { max, result: Mutex::new(None) }
    }

    /// Serializes `result`; an error object when it would be over the reply limit.
    pub fn put(&self, result: &impl Serialize) -> Result<(), ErrorObjectOwned> {
        let mut out = Bounded { buf: Vec::with_capacity(256), max: self.max };
        match serde_json::to_writer(&mut out, result) {
            // serde_json writes UTF-8 only.
            Ok(()) => {
                let text =
                    String::from_utf8(out.buf).map_err(|_| plain(INTERNAL_ERROR, "internal error: bad UTF-8"))?;
                *self.result.lock().unwrap_or_else(PoisonError::into_inner) = Some(text);
                Ok(())
            }
            Err(e) if e.is_io() => Err(reply_too_large(self.max)),
            Err(e) => Err(plain(INTERNAL_ERROR, format!("internal error: {e}"))),
        }
    }

    fn take(&self) -> Option<String> {
        self.result.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// A buffer that refuses to grow past `max` bytes.
struct Bounded {
    buf: Vec<u8>,
    max: usize,
}

impl io::Write for Bounded {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        if self.buf.len() + bytes.len() > self.max {
            return Err(io::Error::other("over the reply limit"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

pub fn error_reply(id: Option<&str>, error: ErrorObjectOwned) -> String {
    let error = serde_json::to_string(&error)
        .unwrap_or_else(|_| format!(r#"{{"code":{INTERNAL_ERROR},"message":"internal error"}}"#));
    format!(r#"{{"jsonrpc":"2.0","id":{},"error":{error}}}"#, id.unwrap_or("null"))
}

/// A request of the server to the client; `id` is JSON text (a string `"convo:N"`).
pub fn request(id: &str, method: &str, params: &impl Serialize) -> serde_json::Result<String> {
    Ok(format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":{},"params":{}}}"#,
        serde_json::to_string(method)?,
        serde_json::to_string(params)?
    ))
}

/// A notification of the server to the client.
pub fn notification(method: &str, params: &impl Serialize) -> serde_json::Result<String> {
    Ok(format!(
        r#"{{"jsonrpc":"2.0","method":{},"params":{}}}"#,
        serde_json::to_string(method)?,
        serde_json::to_string(params)?
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonrpsee::ResponsePayload;
    use jsonrpsee::types::Id;

    #[test]
    fn replies_carry_the_id_as_written() {
        let ok = MethodResponse::response(Id::Null, ResponsePayload::success(5), usize::MAX);
        assert_eq!(with_id("-1.5", ok, 100).into_string(), r#"{"jsonrpc":"2.0","id":-1.5,"result":5}"#);
        let err = MethodResponse::error(Id::Null, plain(1001, "no"));
        assert_eq!(
            with_id(r#""x""#, err, 100).into_string(),
            r#"{"jsonrpc":"2.0","id":"x","error":{"code":1001,"message":"no"}}"#
        );
        let big = MethodResponse::response(Id::Null, ResponsePayload::success("x".repeat(100)), usize::MAX);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&with_id("7", big, 100).into_string()).unwrap()["error"]["code"],
            1005,
            "a reply over the limit is refused"
        );
        assert_eq!(
            error_reply(None, plain(-32700, "bad")),
            r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"bad"}}"#
        );
    }

    #[test]
    fn server_requests_and_notifications() {
        let params = serde_json::json!({"b": 1, "a": [true]});
        assert_eq!(
            request(r#""convo:7""#, "runtime/run", &params).unwrap(),
            r#"{"jsonrpc":"2.0","id":"convo:7","method":"runtime/run","params":{"b":1,"a":[true]}}"#
        );
        assert_eq!(
            notification("$/cancelRequest", &serde_json::json!({"id": "convo:7"})).unwrap(),
            r#"{"jsonrpc":"2.0","method":"$/cancelRequest","params":{"id":"convo:7"}}"#
        );
    }
}
