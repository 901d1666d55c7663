import { StrictMode } from "react";
import { createRoot } from "react-dom/client";
import { App } from "./App";
import { takeLaunchKey } from "./lib/launchKey";
import { settleLocation } from "./lib/routes";
import { useAuth } from "./stores/auth";
import "./styles.css";

// `coli web` and the Tauri app hand over the server's API key in the fragment.
const launchKey = takeLaunchKey();
if (launchKey) useAuth.getState().setKey(launchKey);
// An old `/#brain` address becomes `/brain`; one the app does not know, the start page.
settleLocation();

createRoot(document.getElementById("root")!).render(
  <StrictMode>
    <App />
  </StrictMode>,
);
