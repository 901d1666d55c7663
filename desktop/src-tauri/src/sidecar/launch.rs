//! Pure pieces of a launch: the per-launch API key, the line the sidecar
//! prints once it serves, the dashboard URL, and where the sidecar lives.

use std::path::{Path, PathBuf};

use super::error::{ErrorCode, SidecarError};

/// Overrides where the frozen sidecar is looked for (tests, `cargo run`).
pub const SIDECAR_ENV: &str = "COLI_SIDECAR";
/// The onedir PyInstaller build, as tauri.bundle.conf.json copies it.
pub const SIDECAR_DIR: &str = "sidecar";
#[cfg(windows)]
pub const SIDECAR_EXE: &str = "colibri-sidecar.exe";
#[cfg(not(windows))]
pub const SIDECAR_EXE: &str = "colibri-sidecar";

/// 32 random bytes as 64 hex characters: a fresh key for every launch, so no
/// other local program can use this window's server unless it is handed the key.
pub fn generate_api_key() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `colibri: serving <model> at http://127.0.0.1:PORT/v1 (dashboard ...)` →
/// (model, "http://127.0.0.1:PORT"). The one line `coli serve` prints when ready.
pub fn parse_announce(line: &str) -> Option<(String, String)> {
    let rest = &line[line.find("serving ")? + "serving ".len()..];
    let (model, rest) = rest.split_once(" at ")?;
    let url = rest.split_whitespace().next()?;
    let base = url.strip_suffix("/v1")?;
    if model.is_empty() || !base.starts_with("http://") {
        return None;
    }
    Some((model.to_string(), base.to_string()))
}

/// The dashboard with the key in the fragment: the page reads it at start and
/// removes it from the address; fragments never reach the server or its logs.
pub fn dashboard_url(base: &str, key: &str) -> String {
    format!("{}/#key={key}", base.trim_end_matches('/'))
}

/// "127.0.0.1:PORT" of "http://127.0.0.1:PORT".
pub fn host_port(base: &str) -> Option<&str> {
    let hp = base.strip_prefix("http://")?.trim_end_matches('/');
    (!hp.is_empty() && !hp.contains('/')).then_some(hp)
}

/// $COLI_SIDECAR, else `<resources>/sidecar/colibri-sidecar`.
pub fn locate(env_value: Option<PathBuf>, resource_dir: Option<&Path>) -> Result<PathBuf, SidecarError> {
    let candidate = match (env_value, resource_dir) {
        (Some(p), _) => p,
        (None, Some(dir)) => dir.join(SIDECAR_DIR).join(SIDECAR_EXE),
        (None, None) => {
            return Err(SidecarError::new(ErrorCode::NotFound, format!("no resource folder and no ${SIDECAR_ENV}")))
        }
    };
    if candidate.is_file() {
        Ok(candidate)
    } else {
        Err(SidecarError::new(
            ErrorCode::NotFound,
            format!(
                "the colibri server is missing: no file at {} (build it with packaging/build_sidecar.sh, or point ${SIDECAR_ENV} at it)",
                candidate.display()
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_64_hex_and_differ() {
        let a = generate_api_key().unwrap();
        let b = generate_api_key().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert_ne!(a, b);
    }

    #[test]
    fn the_serving_line_gives_model_and_base() {
        let line = "colibri: serving gemma-3-270m at http://127.0.0.1:40123/v1 (dashboard http://127.0.0.1:40123/)";
        assert_eq!(
            parse_announce(line),
            Some(("gemma-3-270m".to_string(), "http://127.0.0.1:40123".to_string()))
        );
        assert_eq!(parse_announce("Assembling default model x.gguf:  40% (100/250 MiB)"), None);
        assert_eq!(parse_announce("colibri: serving  at http://127.0.0.1:1/v1"), None);
        assert_eq!(parse_announce("colibri: serving m at ftp://x/v1"), None);
        assert_eq!(parse_announce("colibri: serving m at http://127.0.0.1:5/"), None);
    }

    #[test]
    fn dashboard_url_carries_the_key_in_the_fragment() {
        assert_eq!(dashboard_url("http://127.0.0.1:5/", "ab"), "http://127.0.0.1:5/#key=ab");
        assert_eq!(host_port("http://127.0.0.1:5"), Some("127.0.0.1:5"));
        assert_eq!(host_port("http://127.0.0.1:5/x"), None);
        assert_eq!(host_port("https://a"), None);
    }

    #[test]
    fn a_missing_sidecar_is_a_named_error() {
        let err = locate(None, Some(Path::new("/nonexistent"))).unwrap_err();
        assert_eq!(err.code, ErrorCode::NotFound);
        assert!(err.message.contains("/nonexistent/sidecar/colibri-sidecar"), "{}", err.message);
        assert!(err.to_string().starts_with("NOT_FOUND: "));
        let here = std::env::current_exe().unwrap();
        assert_eq!(locate(Some(here.clone()), None).unwrap(), here);
    }

    #[test]
    fn the_dashboard_gets_no_tauri_api() {
        // Least privilege: the shell grants no capability, so neither the splash
        // nor the dashboard (a remote page) can call into Rust or the OS.
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        assert!(!root.join("capabilities").exists(), "capabilities/ appeared: review what it grants");
        let conf: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(root.join("tauri.conf.json")).unwrap()).unwrap();
        assert!(conf["app"]["security"].get("capabilities").is_none());
        assert_ne!(conf["app"].get("withGlobalTauri"), Some(&serde_json::Value::Bool(true)));
    }
}
