//! Reference resolution (stub: being written).

use serde_json::{Map, Value};

/// Why a step's parameters could not be resolved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{0}")]
pub struct ResolveError(pub String);

/// Replaces every reference in `params` with the referenced output value.
pub fn resolve_parameters(
    params: &Map<String, Value>,
    _outputs: &dyn Fn(&str) -> Option<&Value>,
) -> Result<Map<String, Value>, ResolveError> {
    Ok(params.clone())
}
