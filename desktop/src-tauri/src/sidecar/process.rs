//! Starting the sidecar, pumping its output, and stopping it politely: SIGTERM,
//! a timed wait, then SIGKILL — only ever the PID this shell spawned.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Sender;
use std::thread;
use std::time::{Duration, Instant};

use super::error::{ErrorCode, SidecarError};

/// `colibri-sidecar serve --host 127.0.0.1 --port 0`: the OS picks a free port
/// and the sidecar prints it; the key travels in the environment, not argv
/// (which any local user can read in `ps`).
pub fn spawn(exe: &Path, api_key: &str, lines: Sender<String>) -> Result<Child, SidecarError> {
    let mut cmd = Command::new(exe);
    cmd.args(["serve", "--host", "127.0.0.1", "--port", "0"])
        .env("COLI_API_KEY", api_key)
        .env_remove("COLI_HOST")
        .env_remove("COLI_PORT")
        .env("PYTHONUNBUFFERED", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        // If the shell itself is killed (SIGKILL, a crash), the sidecar gets SIGTERM
        // instead of living on as an orphan holding the model in memory.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
    }
    let mut child = cmd.spawn().map_err(|e| {
        SidecarError::new(ErrorCode::SpawnFailed, format!("cannot start {}: {e}", exe.display()))
    })?;
    if let Some(out) = child.stdout.take() {
        pump("stdout", out, lines.clone());
    }
    if let Some(err) = child.stderr.take() {
        pump("stderr", err, lines);
    }
    Ok(child)
}

/// Every line to our stderr with a prefix, and to the supervisor.
fn pump(name: &'static str, stream: impl Read + Send + 'static, lines: Sender<String>) {
    let _ = thread::Builder::new().name(format!("sidecar-{name}")).spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            // progress redrawn in place arrives as one line with carriage returns
            let line = line.rsplit('\r').next().unwrap_or("").trim_end().to_string();
            if line.is_empty() {
                continue;
            }
            eprintln!("[sidecar] {line}");
            let _ = lines.send(line);
        }
    });
}

/// SIGTERM (the sidecar drains and exits), up to `timeout`, then SIGKILL.
pub fn terminate(child: &mut Child, timeout: Duration) {
    if let Ok(Some(_)) = child.try_wait() {
        return;
    }
    #[cfg(unix)]
    {
        if let Ok(pid) = libc::pid_t::try_from(child.id()) {
            unsafe {
                libc::kill(pid, libc::SIGTERM);
            }
        }
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        eprintln!("[colibri] the sidecar did not stop within {timeout:?}; killing it");
    }
    #[cfg(not(unix))]
    let _ = timeout;
    let _ = child.kill();
    let _ = child.wait();
}
