//! What can go wrong with the sidecar, with stable codes the splash shows.

use std::fmt;

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ErrorCode {
    /// No frozen sidecar where the bundle puts it (nor at $COLI_SIDECAR).
    NotFound,
    /// The executable exists but could not be started.
    SpawnFailed,
    /// It exited before announcing its URL (a bad model, a taken port, ...).
    ExitedEarly,
    /// It announced a URL but /health never answered in time.
    HealthTimeout,
    /// It stopped after serving and the restarts ran out.
    GaveUp,
}

#[derive(Debug, Clone)]
pub struct SidecarError {
    pub code: ErrorCode,
    pub message: String,
}

impl SidecarError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }
}

impl fmt::Display for SidecarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let code = serde_json::to_value(self.code).ok();
        let code = code.as_ref().and_then(|v| v.as_str()).unwrap_or("ERROR");
        write!(f, "{code}: {}", self.message)
    }
}

impl std::error::Error for SidecarError {}
