//! colibri's desktop shell: wiring only. The sidecar (the frozen `coli serve`)
//! is started, watched and stopped by `sidecar`; everything else is the
//! sidecar's job — the shell never grows a second backend.

mod sidecar;

use std::sync::Arc;

use tauri::{Manager, RunEvent};

use sidecar::Sidecar;

pub fn run() {
    let app = tauri::Builder::default()
        .setup(|app| {
            let handle = app.handle().clone();
            let sidecar = Arc::new(Sidecar::new());
            app.manage(sidecar.clone());
            // The splash is already up (tauri.conf.json); the sidecar starts off the UI thread.
            std::thread::Builder::new()
                .name("sidecar-supervisor".into())
                .spawn(move || sidecar::supervise(handle, sidecar))?;
            Ok(())
        })
        .build(tauri::generate_context!())
        .expect("the Tauri application could not be built");

    app.run(|handle, event| {
        if let RunEvent::Exit = event {
            if let Some(sidecar) = handle.try_state::<Arc<Sidecar>>() {
                sidecar.stop();
            }
        }
    });
}
