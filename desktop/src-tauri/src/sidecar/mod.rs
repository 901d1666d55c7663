//! The frozen sidecar (`coli serve` made into one folder by PyInstaller):
//! started on a free port with a per-launch key, watched, restarted a few
//! times if it dies, stopped on quit.

mod error;
mod health;
mod launch;
mod process;

use std::path::PathBuf;
use std::process::Child;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tauri::{AppHandle, Manager, Url, WebviewWindow};

pub use error::{ErrorCode, SidecarError};

/// Restarts after the sidecar dies while serving, before the shell gives up.
const MAX_RESTARTS: u32 = 3;
const RESTART_DELAY_MS: u64 = 1500;
/// Loading a large model from a cold disk can take minutes; the splash shows progress meanwhile.
const READY_TIMEOUT: Duration = Duration::from_secs(600);
const HEALTH_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Lines kept for the splash's error details.
const TAIL_LINES: usize = 20;

#[derive(Default)]
pub struct Sidecar {
    child: Mutex<Option<Child>>,
    /// Set on quit: an exit after this is not a crash to restart from.
    stopping: AtomicBool,
}

impl Sidecar {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stop the sidecar for good (RunEvent::Exit). Blocks up to STOP_TIMEOUT.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::SeqCst);
        let child = self.child.lock().map(|mut c| c.take()).unwrap_or(None);
        if let Some(mut child) = child {
            eprintln!("[colibri] stopping the sidecar (pid {})", child.id());
            process::terminate(&mut child, STOP_TIMEOUT);
        }
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// None while running, Some(description) once it has exited (or was taken by stop()).
    fn exited(&self) -> Option<String> {
        let mut guard = self.child.lock().ok()?;
        match guard.as_mut() {
            None => Some("stopped".into()),
            Some(child) => match child.try_wait() {
                Ok(None) => None,
                Ok(Some(status)) => Some(status.to_string()),
                Err(e) => Some(e.to_string()),
            },
        }
    }
}

/// Runs on its own thread for the life of the app.
pub fn supervise(app: AppHandle, sidecar: Arc<Sidecar>) {
    let Some(window) = app.get_webview_window("main") else {
        eprintln!("[colibri] no main window");
        return;
    };
    let splash = window.url().ok();
    let exe = match launch::locate(std::env::var_os(launch::SIDECAR_ENV).map(PathBuf::from),
                                   app.path().resource_dir().ok().as_deref()) {
        Ok(exe) => exe,
        Err(e) => return fail(&window, &e, &[]),
    };
    let key = match launch::generate_api_key() {
        Ok(key) => key,
        Err(e) => return fail(&window, &SidecarError::new(ErrorCode::SpawnFailed, format!("no random key: {e}")), &[]),
    };
    let mut restarts = 0;
    loop {
        let mut tail = Vec::new();
        match start_once(&sidecar, &exe, &key, &window, &mut tail) {
            Ok((model, base)) => {
                eprintln!("[colibri] {model} is ready at {base}; showing the dashboard");
                if let Ok(url) = Url::parse(&launch::dashboard_url(&base, &key)) {
                    let _ = window.navigate(url);
                }
                while !sidecar.stopping() && sidecar.exited().is_none() {
                    std::thread::sleep(Duration::from_millis(300));
                }
            }
            // failing to come up is not retried: a bad model or a taken port fails the same way again
            Err(e) if !sidecar.stopping() => return fail(&window, &e, &tail),
            Err(_) => {}
        }
        if sidecar.stopping() {
            return;
        }
        let how = sidecar.exited().unwrap_or_default();
        restarts += 1;
        if restarts > MAX_RESTARTS {
            let e = SidecarError::new(ErrorCode::GaveUp, format!("the server stopped ({how}) {MAX_RESTARTS} times"));
            return fail(&window, &e, &tail);
        }
        eprintln!("[colibri] the sidecar stopped ({how}); restart {restarts} of {MAX_RESTARTS}");
        if let Some(url) = splash.clone() {
            let _ = window.navigate(url);
        }
        std::thread::sleep(Duration::from_millis(RESTART_DELAY_MS));
        status(&window, &format!("The server stopped ({how}); starting it again…"));
    }
}

/// Spawn, forward output to the splash until the serving line, wait for /health.
fn start_once(sidecar: &Sidecar, exe: &std::path::Path, key: &str, window: &WebviewWindow,
              tail: &mut Vec<String>) -> Result<(String, String), SidecarError> {
    let (tx, rx) = channel();
    let child = process::spawn(exe, key, tx)?;
    if let Ok(mut slot) = sidecar.child.lock() {
        *slot = Some(child);
    }
    let (model, base) = wait_for_announce(sidecar, &rx, window, tail)?;
    status(window, &format!("Serving {model}; opening the dashboard…"));
    let hp = launch::host_port(&base)
        .ok_or_else(|| SidecarError::new(ErrorCode::ExitedEarly, format!("unexpected URL {base}")))?;
    let deadline = Instant::now() + HEALTH_TIMEOUT;
    while !health::health_ok(hp, key) {
        if sidecar.stopping() || sidecar.exited().is_some() || Instant::now() > deadline {
            return Err(SidecarError::new(ErrorCode::HealthTimeout, format!("{base}/health did not answer")));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    // after the splash is gone, lines are only logged (the pump threads print them)
    std::thread::spawn(move || for _ in rx {});
    Ok((model, base))
}

fn wait_for_announce(sidecar: &Sidecar, rx: &Receiver<String>, window: &WebviewWindow,
                     tail: &mut Vec<String>) -> Result<(String, String), SidecarError> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        match rx.recv_timeout(Duration::from_millis(250)) {
            Ok(line) => {
                if let Some(found) = launch::parse_announce(&line) {
                    return Ok(found);
                }
                status(window, &line);
                tail.push(line);
                if tail.len() > TAIL_LINES {
                    tail.remove(0);
                }
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => std::thread::sleep(Duration::from_millis(100)),
        }
        if sidecar.stopping() {
            return Err(SidecarError::new(ErrorCode::ExitedEarly, "stopped while loading"));
        }
        if let Some(how) = sidecar.exited() {
            // drain what it said last
            while let Ok(line) = rx.try_recv() {
                tail.push(line);
            }
            return Err(SidecarError::new(ErrorCode::ExitedEarly, format!("the server exited while loading ({how})")));
        }
        if Instant::now() > deadline {
            return Err(SidecarError::new(ErrorCode::HealthTimeout, format!("not serving after {READY_TIMEOUT:?}")));
        }
    }
}

fn status(window: &WebviewWindow, line: &str) {
    let arg = serde_json::to_string(line).unwrap_or_else(|_| "\"\"".into());
    let _ = window.eval(format!("window.colibriSplash && window.colibriSplash.status({arg})"));
}

fn fail(window: &WebviewWindow, err: &SidecarError, tail: &[String]) {
    eprintln!("[colibri] {err}");
    let msg = serde_json::to_string(&err.to_string()).unwrap_or_else(|_| "\"\"".into());
    let details = serde_json::to_string(&tail.join("\n")).unwrap_or_else(|_| "\"\"".into());
    let _ = window.eval(format!("window.colibriSplash && window.colibriSplash.fail({msg}, {details})"));
}
