//! A run's model conversations read back from the journal: each call's request rebuilt from its
//! blobs (following the chain of calls whose messages it extends, see `call_log`) and its
//! response. What `pev show --conversation` prints and what a replay answers from.

use std::collections::HashMap;

use pev_providers::{ChatRequest, ChatResponse};
use pev_store::{ModelCallRecord, Store};
use serde_json::Value;

/// One call with what it sent and what came back.
#[derive(Debug, Clone)]
pub struct Exchange {
    pub call: ModelCallRecord,
    /// `None` for a call journaled before requests were kept.
    pub request: Option<ChatRequest>,
    /// How many of the request's messages the previous call of the same conversation had sent
    /// (the rest are new with this call).
    pub prior_messages: usize,
    pub response: Option<ChatResponse>,
}

/// Reads blobs once each.
struct Blobs<'a> {
    store: &'a Store,
    values: HashMap<String, Value>,
}

impl Blobs<'_> {
    fn bytes(&self, sha: &str) -> Result<Vec<u8>, String> {
        self.store
            .blob(sha)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("blob {sha} is not in the journal"))
    }

    fn json(&mut self, sha: &str) -> Result<Value, String> {
        if let Some(v) = self.values.get(sha) {
            return Ok(v.clone());
        }
        let v: Value = serde_json::from_slice(&self.bytes(sha)?)
            .map_err(|e| format!("blob {sha} is not JSON: {e}"))?;
        self.values.insert(sha.to_owned(), v.clone());
        Ok(v)
    }
}

/// Every call of `calls` (a run's, in order) with its request and response.
pub fn exchanges(store: &Store, calls: &[ModelCallRecord]) -> Result<Vec<Exchange>, String> {
    let mut blobs = Blobs { store, values: HashMap::new() };
    // Each call's full list of message blobs, to resolve the next call's prefix.
    let mut messages_of: HashMap<u64, Vec<String>> = HashMap::new();
    let mut out = Vec::with_capacity(calls.len());
    // A call cut off by a kill was never answered (`agent::call_marks`): nothing to replay.
    for call in calls.iter().filter(|c| c.error_type.as_deref() != Some("cut_off")) {
        let why = |e: String| format!("model call {} ({}): {e}", call.seq, call.role);
        let (request, prior_messages) = match &call.request {
            None => (None, 0),
            Some(r) => {
                let mut shas: Vec<String> = match r.prior {
                    Some(prior) => {
                        let before = messages_of.get(&prior).ok_or_else(|| {
                            why(format!("it extends call {prior}, which the journal lacks"))
                        })?;
                        before
                            .get(..r.prior_messages)
                            .ok_or_else(|| {
                                why(format!(
                                    "call {prior} has fewer than {} messages",
                                    r.prior_messages
                                ))
                            })?
                            .to_vec()
                    }
                    None => Vec::new(),
                };
                shas.extend(r.messages.iter().cloned());
                let mut doc = r.params.clone();
                let Some(obj) = doc.as_object_mut() else {
                    return Err(why("its parameters are not an object".to_owned()));
                };
                let messages = shas
                    .iter()
                    .map(|s| blobs.json(s))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(why)?;
                obj.insert("messages".to_owned(), Value::Array(messages));
                if let Some(sha) = &r.system {
                    let text = String::from_utf8(blobs.bytes(sha).map_err(why)?)
                        .map_err(|_| why("the system prompt is not UTF-8".to_owned()))?;
                    obj.insert("system".to_owned(), Value::String(text));
                }
                if let Some(sha) = &r.tools {
                    obj.insert("tools".to_owned(), blobs.json(sha).map_err(why)?);
                }
                let request: ChatRequest = serde_json::from_value(doc)
                    .map_err(|e| why(format!("the request does not read back: {e}")))?;
                messages_of.insert(call.seq, shas);
                (Some(request), r.prior_messages)
            }
        };
        let response = match &call.response_sha256 {
            None => None,
            Some(sha) => Some(
                serde_json::from_value(blobs.json(sha).map_err(why)?)
                    .map_err(|e| why(format!("the response does not read back: {e}")))?,
            ),
        };
        out.push(Exchange { call: call.clone(), request, prior_messages, response });
    }
    Ok(out)
}

#[cfg(test)]
#[path = "conversation_tests.rs"]
mod tests;
